"""A gateway running apart from the head: it reads ready replicas from the head's API and
reports its request counters back, so the head's autoscaler sees its traffic too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket

import httpx

from corral.api.services import GatewayView
from corral.serve.proxy.aioserver import serve
from corral.serve.proxy.gateway import Gateway
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool
from corral.serve.proxy.repeated import RepeatedWarning

log = logging.getLogger(__name__)
REPORT_INTERVAL_S = 0.5


def standalone_gateway(head_url: str, token: str, name: str | None = None) -> Gateway:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    head = httpx.AsyncClient(base_url=head_url, headers=headers, timeout=10.0, trust_env=False)
    report_now = asyncio.Event()
    book = LoadBook(on_waiting=report_now.set)
    gateway_name = name or f"{socket.gethostname()}-{id(book):x}"
    report_failures = RepeatedWarning(log, "cannot report load to the head")

    async def view() -> GatewayView:
        response = await head.get("/v1/gateway/endpoints")
        response.raise_for_status()
        return GatewayView.model_validate_json(response.content)

    async def report_forever() -> None:
        try:
            while True:
                report_now.clear()
                services = {k: v.model_dump() for k, v in book.local_report().items()}
                try:
                    response = await head.post("/v1/gateway/load", json={"gateway": gateway_name, "services": services})
                    response.raise_for_status()
                except httpx.HTTPError as exc:
                    report_failures.failed(exc)
                else:
                    report_failures.succeeded()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(REPORT_INTERVAL_S):
                        await report_now.wait()
        finally:
            await head.aclose()

    return Gateway(ReplicaPool(view), book, background=[report_forever])


def run(head_url: str, token: str, host: str, port: int) -> None:
    """Serve the gateway in the foreground (aiohttp's server) until SIGINT or SIGTERM."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio disables Nagle only on sockets whose protocol says TCP.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"corral gateway: cannot listen on {host}:{port}: {exc.strerror}") from None
    log.info("gateway for %s listening on %s:%s", head_url, host, port)
    asyncio.run(_serve_until_signalled(standalone_gateway(head_url, token), sock))


async def _serve_until_signalled(gateway: Gateway, sock: socket.socket) -> None:
    task = asyncio.create_task(serve(gateway, sock))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
