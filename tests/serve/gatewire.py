"""Real HTTP on 127.0.0.1 for the gateway's tests: tiny replicas that see each request's bytes and
answer as a test needs, and the gateway served on a socket by uvicorn (as the head serves it) or by
aiohttp's server (as `corral gateway` serves it)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import uvicorn
import uvloop

from corral.api.services import Endpoint, GatewayView, ServiceEndpoints
from corral.serve.proxy.aioserver import serve
from corral.serve.proxy.gateway import Gateway
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool

T = TypeVar("T")
FRONTS = ["uvicorn", "aiohttp"]
# The event loop each front runs on in Corral: uvicorn picks uvloop for the head; `corral gateway` runs asyncio's.
LOOP_OF = {"uvicorn": "uvloop", "aiohttp": "asyncio"}


def run(coroutine: Coroutine[Any, Any, T], loop: str = "asyncio") -> T:
    """Run on an event loop (``asyncio`` or ``uvloop``) of its own thread."""
    runner = uvloop.run if loop == "uvloop" else asyncio.run
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(runner, coroutine).result()


@dataclass
class Seen:
    target: bytes
    headers: dict[bytes, bytes]
    body: bytes
    reader: asyncio.StreamReader = field(compare=False, repr=False)  # the connection, for handlers that wait on it
    method: bytes = b"GET"


Handler = Callable[["TinyReplica", Seen, asyncio.StreamWriter], Awaitable[bool]]


class TinyReplica:
    """An HTTP/1.1 server that records each request as received and lets ``handler`` answer it
    (the handler answers whether the connection stays open). It counts its open connections, the
    most it had at once, and when each one ended."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        self.server: asyncio.Server | None = None
        self.open = 0
        self.most_open = 0
        self.ended: list[float] = []  # time.monotonic() at the end of each connection

    async def start(self, backlog: int = 100) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=backlog)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def stop_listening(self) -> None:
        assert self.server is not None
        self.server.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head[:-4].split(b"\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(b":") for f in fields)}
                body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
                method, target = line.split(b" ")[:2]
                seen = Seen(target=target, headers=headers, body=body, reader=reader, method=method)
                self.seen.append(seen)
                if not await self.handler(self, seen, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            self.ended.append(time.monotonic())
            writer.close()


def answer(body: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 200 OK", b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def echo_target(_replica: TinyReplica, seen: Seen, writer: asyncio.StreamWriter) -> bool:
    writer.write(answer(seen.target))
    return True


def gateway(*replicas: tuple[str, str], hold_s: float = 5) -> Gateway:
    """A gateway for service ``m`` served by ``replicas`` (name, URL)."""
    endpoints = [Endpoint(replica=name, url=url) for name, url in replicas]
    view = GatewayView(services=[ServiceEndpoints(service="m", ready=endpoints, hold_s=hold_s, stopped=False)])

    async def source() -> GatewayView:
        return view

    return Gateway(ReplicaPool(source, interval_s=0.05), LoadBook())


@contextlib.asynccontextmanager
async def fronted(kind: str, gw: Gateway, *replicas: TinyReplica) -> AsyncIterator[str]:
    """The gateway served on a real socket by ``kind``; its base URL. The replicas close after."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server: uvicorn.Server | None = None
    if kind == "uvicorn":
        # As the head runs it (src/corral/head/main.py): Date and Server are the replica's own.
        config = uvicorn.Config(
            gw, lifespan="on", log_config=None, log_level="warning", access_log=False,
            date_header=False, server_header=False,
        )  # fmt: skip
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
    else:
        task = asyncio.create_task(serve(gw, sock))
        while True:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
                writer.close()
                break
            await asyncio.sleep(0.01)
    try:
        yield url
    finally:
        if server is not None:
            server.should_exit = True
            await task
        else:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        sock.close()
        for replica in replicas:
            await replica.close()


async def raw_request(
    url: str, request: bytes, source: str | None = None, with_body: bool = True
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Send ``request`` byte for byte on a new connection (from address ``source``, if given); the
    status, headers and body (read by its Content-Length; none when not ``with_body``, as for HEAD)."""
    host, port = url.removeprefix("http://").split(":")
    local = (source, 0) if source else None
    reader, writer = await asyncio.open_connection(host, int(port), local_addr=local)
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *fields = head[:-4].split(b"\r\n")
        headers = [(k.strip().lower(), v.strip()) for k, _, v in (f.partition(b":") for f in fields)]
        length = int(dict(headers).get(b"content-length", b"0")) if with_body else 0
        return int(status_line.split(b" ")[1]), headers, await reader.readexactly(length)
    finally:
        writer.close()
