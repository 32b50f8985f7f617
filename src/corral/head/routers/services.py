"""/v1/services: create or update, list, show, scale, delete; /v1/gateway: what gateways need."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from corral.api.services import GatewayView, LoadReport, ScaleRequest, ServiceOut
from corral.head.routers.deps import Runtime, User
from corral.head.runtime import HeadRuntime
from corral.head.services import serving as service
from corral.serve.proxy.gateway import Gateway
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool
from corral.spec.service import ServiceSpec

router = APIRouter(prefix="/v1/services", tags=["services"])
gateway_router = APIRouter(prefix="/v1/gateway", tags=["services"])


@router.post("", status_code=201, response_model=ServiceOut)
def apply(spec: ServiceSpec, rt: Runtime, who: User, response: Response) -> ServiceOut:
    """Create a service (201), or update one of the same name (200): a new replica template
    rolls out one replica at a time."""
    out, created = service.apply(rt, who, spec)
    if not created:
        response.status_code = 200
    return out


@router.get("", response_model=list[ServiceOut])
def list_services(rt: Runtime, who: User) -> list[ServiceOut]:
    return service.list_services(rt, who)


@router.get("/{name}", response_model=ServiceOut)
def show(name: str, rt: Runtime, who: User) -> ServiceOut:
    return service.show(rt, who, name)


@router.post("/{name}/scale", response_model=ServiceOut)
def scale(name: str, body: ScaleRequest, rt: Runtime, who: User) -> ServiceOut:
    """Run exactly this many replicas (min = max = N) until the service file is applied again."""
    return service.scale(rt, who, name, body.replicas)


@router.delete("/{name}", status_code=204)
def delete(name: str, rt: Runtime, who: User) -> Response:
    """Delete the service; its replicas are stopped."""
    service.remove(rt, who, name)
    return Response(status_code=204)


@gateway_router.get("/endpoints", response_model=GatewayView)
def endpoints(rt: Runtime, _who: User) -> GatewayView:
    """Every service's ready replicas, for gateways."""
    return service.gateway_view(rt)


@gateway_router.post("/load", status_code=204)
async def report_load(report: LoadReport, request: Request, rt: Runtime, _who: User) -> Response:
    """A gateway's request counters, which the autoscaler adds to the head's own."""
    book: LoadBook = request.app.state.serve_book
    book.report(report.gateway, report.services, rt.clock.monotonic())
    return Response(status_code=204)


def in_process_gateway(rt: HeadRuntime, book: LoadBook) -> Gateway:
    """The gateway the head serves at /s/: it reads ready replicas straight from the database
    and counts its traffic in the head's own load book."""

    async def view() -> GatewayView:
        return await asyncio.to_thread(service.gateway_view, rt)

    pool = ReplicaPool(view)
    service.watch(rt, pool.invalidate)  # the next request sees a scale or delete at once
    return Gateway(pool, book)


class GatewayFirst:
    """ASGI middleware: requests under /s/ go straight to the gateway, past the API's routing and
    exception layers (about half the CPU time of a proxied request otherwise: docs/benchmarks.md)."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/s/"):
            await self.gateway(scope, receive, send)
        else:
            await self.app(scope, receive, send)
