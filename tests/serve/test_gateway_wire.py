"""The gateway on the wire: real HTTP on 127.0.0.1 between a client, the gateway (on uvicorn as the
head serves it, and on aiohttp's server as `corral gateway` serves it) and tiny replicas that
see each request's bytes and answer as each test needs: cut off, wrong, or well."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn

from corral.api.services import Endpoint, GatewayView, ServiceEndpoints
from corral.serve.proxy.aioserver import serve
from corral.serve.proxy.gateway import Gateway
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool

T = TypeVar("T")
FRONTS = ["uvicorn", "aiohttp"]


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@dataclass
class Seen:
    target: bytes
    headers: dict[bytes, bytes]
    body: bytes


Handler = Callable[["TinyReplica", Seen, asyncio.StreamWriter], Awaitable[bool]]


class TinyReplica:
    """An HTTP/1.1 server that records each request as received and lets ``handler`` answer it
    (the handler answers whether the connection stays open)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    def stop_listening(self) -> None:
        assert self.server is not None
        self.server.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head[:-4].split(b"\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(b":") for f in fields)}
                body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
                seen = Seen(target=line.split(b" ")[1], headers=headers, body=body)
                self.seen.append(seen)
                if not await self.handler(self, seen, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def answer(body: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 200 OK", b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def echo_target(_replica: TinyReplica, seen: Seen, writer: asyncio.StreamWriter) -> bool:
    writer.write(answer(seen.target))
    return True


def gateway(*replicas: tuple[str, str]) -> Gateway:
    endpoints = [Endpoint(replica=name, url=url) for name, url in replicas]
    view = GatewayView(services=[ServiceEndpoints(service="m", ready=endpoints, hold_s=5, stopped=False)])

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


async def raw_request(url: str, request: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Send ``request`` byte for byte on a new connection; the status, headers and body."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *fields = head[:-4].split(b"\r\n")
        headers = [(k.strip().lower(), v.strip()) for k, _, v in (f.partition(b":") for f in fields)]
        length = int(dict(headers).get(b"content-length", b"0"))
        return int(status_line.split(b" ")[1]), headers, await reader.readexactly(length)
    finally:
        writer.close()


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "POST"])
def test_a_request_that_reached_a_replica_stopped_mid_request_is_not_sent_again(front, method):
    async def answer_once_then_stop(replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
        if len(replica.seen) == 1:  # the first request leaves a kept-alive connection behind
            writer.write(answer(b"first"))
            return True
        replica.stop_listening()  # stopped mid-request: no answer, and no new connections
        return False

    async def scenario() -> tuple[list[int], TinyReplica, TinyReplica, httpx.Response]:
        stopping, other = TinyReplica(answer_once_then_stop), TinyReplica(echo_target)
        gw = gateway(("stopping", await stopping.start()), ("other", await other.start()))
        gw.pool.outstanding["other"] = 1000  # the balancer picks "stopping" while it is in the pool
        async with fronted(front, gw, stopping, other) as url, httpx.AsyncClient(base_url=url) as client:
            first = await client.request(method, "/s/m/first", content=b"x" if method in ("PUT", "POST") else None)
            second = await client.request(method, "/s/m/second", content=b"y" if method in ("PUT", "POST") else None)
        return [first.status_code], stopping, other, second

    statuses, stopping, other, second = run(scenario())
    assert statuses == [200]
    assert [s.target for s in stopping.seen] == [b"/first", b"/second"]
    assert other.seen == []  # the replica had it: it is not sent anywhere else
    assert second.status_code == 502 and second.headers["x-corral-replica"] == "stopping"


EXACT = [
    b"/s/m/a%23b",
    b"/s/m/a%3Fb=c",
    b"/s/m/a%2Fb",
    b"/s/m/a%2541",
    b"/s/m//double//slash",
    b"/s/m/x/../y/./z",
    b"/s/m/sign?x=%2F&y=%3F&z=%41&w=a+b&v=%zz&&u",
    b"/s/m/?",
    b"/s/m",
]


@pytest.mark.parametrize("front", FRONTS)
def test_paths_and_query_strings_reach_the_replica_byte_for_byte(front):
    async def scenario() -> tuple[list[tuple[int, bytes]], TinyReplica]:
        replica = TinyReplica(echo_target)
        gw = gateway(("r", await replica.start()))
        out = []
        async with fronted(front, gw, replica) as url:
            for path in EXACT:
                status, _, body = await raw_request(url, b"GET %s HTTP/1.1\r\nHost: gw\r\n\r\n" % path)
                out.append((status, body))
        return out, replica

    answers, replica = run(scenario())
    assert [status for status, _ in answers] == [200] * len(EXACT)
    expected = [b"/a%23b", b"/a%3Fb=c", b"/a%2Fb", b"/a%2541", b"//double//slash", b"/x/../y/./z"]
    expected += [b"/sign?x=%2F&y=%3F&z=%41&w=a+b&v=%zz&&u", b"/", b"/"]
    assert [s.target for s in replica.seen] == expected


@pytest.mark.parametrize("front", FRONTS)
def test_request_bodies_of_many_megabytes_pass_on_both_servers(front):
    big = bytes(range(256)) * (24 * 4096)  # 24 MiB

    async def length(_replica: TinyReplica, seen: Seen, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b"%d" % len(seen.body)))
        return True

    async def scenario() -> tuple[httpx.Response, TinyReplica]:
        replica = TinyReplica(length)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            return await client.post("/s/m/upload", content=big), replica

    response, replica = run(scenario())
    assert response.status_code == 200 and response.text == str(len(big))
    assert replica.seen[0].body == big


def cut_after(head: bytes, sent: bytes) -> Handler:
    async def handler(_replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
        writer.write(head + sent)
        await writer.drain()
        await asyncio.sleep(0.1)  # the gateway has passed on what it got: now the replica dies
        return False

    return handler


CUTS = {
    "small-fixed": (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"x" * 5000),
    "large-fixed": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", b"x" * 5000),
    "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"5\r\nhello\r\n5\r\nworld\r\n"),
}


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("cut", CUTS)
def test_a_replica_dying_mid_response_is_never_a_complete_answer_nor_a_traceback(front, cut, caplog):
    caplog.set_level(logging.WARNING)

    async def scenario() -> tuple[int, str | None, bool]:
        replica = TinyReplica(cut_after(*CUTS[cut]))
        gw = gateway(("dying", await replica.start()))
        async with fronted(front, gw, replica) as url, httpx.AsyncClient(base_url=url) as client:
            async with client.stream("GET", "/s/m/big") as response:
                try:
                    await response.aread()
                    whole = True
                except httpx.RemoteProtocolError:
                    whole = False
            return response.status_code, response.headers.get("x-corral-replica"), whole

    status, named, whole = run(scenario())
    assert named == "dying"
    if cut == "small-fixed":  # nothing had gone to the client yet: an honest 502
        assert status == 502 and whole
    else:  # the status line had gone: the client's connection is cut, never a false end
        assert status == 200 and not whole
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    assert any("dying" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


@pytest.mark.parametrize("front", FRONTS)
def test_the_replicas_date_and_server_headers_pass_once(front):
    dated = (b"Date: Mon, 01 Jan 2024 00:00:00 GMT", b"Server: tiny/1")

    async def with_headers(_replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b"ok", *dated))
        return True

    async def scenario() -> list[tuple[bytes, bytes]]:
        replica = TinyReplica(with_headers)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url:
            _, headers, _ = await raw_request(url, b"GET /s/m/ HTTP/1.1\r\nHost: gw\r\n\r\n")
        return headers

    headers = run(scenario())
    assert [v for k, v in headers if k == b"date"] == [b"Mon, 01 Jan 2024 00:00:00 GMT"]
    assert [v for k, v in headers if k == b"server"] == [b"tiny/1"]
