"""/v1/agents: registration, heartbeats, the desired-state long-poll, log shipping."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response

from corral.api import DesiredState, HeartbeatRequest, RegisterRequest, RegisterResponse
from corral.head.routers.deps import AnyPrincipal, Bearer, Runtime
from corral.head.routers.rawbody import json_body, parse
from corral.head.security import Role
from corral.head.services import agents as service
from corral.head.services import logs

router = APIRouter(prefix="/v1/agents", tags=["agents"])
MAX_WAIT_S = 60.0


@router.post("/register", response_model=RegisterResponse)
def register(req: RegisterRequest, rt: Runtime, who: AnyPrincipal) -> RegisterResponse:
    """Join the cluster with the join token (or an admin token); answers the node's own credential."""
    if who.role not in (Role.AGENT, Role.ADMIN):
        raise HTTPException(403, "registering a node needs the join token (`corral join-token`) or an admin token")
    return service.register(rt, req)


@router.post("/{node}/heartbeat", response_model=DesiredState, openapi_extra=json_body(HeartbeatRequest))
async def heartbeat(node: str, request: Request, rt: Runtime, token: Bearer) -> Response:
    """Report task states; the answer is the node's desired state."""
    req = parse(HeartbeatRequest, await request.body())
    answer = service.quiet_heartbeat(rt, node, token, req)  # in memory: no need to leave the event loop
    if answer is None:
        answer = await asyncio.to_thread(service.heartbeat, rt, node, token, req)
    return Response(answer, media_type="application/json")


@router.get("/{node}/desired", response_model=DesiredState)
async def desired(
    node: str,
    rt: Runtime,
    token: Bearer,
    after: Annotated[int, Query(description="the version the agent has; answer when it changes")] = -1,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S)] = 0.0,
) -> Response:
    """Long-poll: returns as soon as the node's desired state differs from version `after`."""
    current = await asyncio.to_thread(service.current_version, rt, node, token)
    if rt.notifier is not None and wait > 0:
        await rt.notifier.wait_for_change(node, after, current, wait)
    desired = await asyncio.to_thread(service.read_desired, rt, node, token)
    return Response(desired, media_type="application/json")


@router.put("/{node}/logs/{job_id}/{generation}/{rank}")
async def ship_logs(
    node: str,
    job_id: str,
    generation: int,
    rank: int,
    request: Request,
    rt: Runtime,
    token: Bearer,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, int]:
    """Append a chunk of one rank's output at `offset`; answers the new size."""
    data = await request.body()

    def write() -> int:
        with rt.read() as session:
            service.authenticate_node(session, node, token)
        return logs.append_chunk(rt, job_id, generation, rank, offset, data)

    return {"size": await asyncio.to_thread(write)}
