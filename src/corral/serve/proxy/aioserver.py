"""Serve the gateway (an ASGI app) on aiohttp's HTTP server: the lean server for `corral gateway`.

aiohttp parses HTTP in C and writes a whole response (headers and body) in one system call,
where uvicorn with its pure-Python parser writes the headers and the body separately;
docs/benchmarks.md has the figures. Only what the gateway uses of ASGI is supported: the
request body in pieces as it arrives (no size limit, as under uvicorn), and a response that is
either whole or streamed. A streamed response the gateway leaves unfinished (its replica died
mid-way) cuts the client's connection, as uvicorn does.

The response's head is the replica's: its Content-Length stays (a long body is streamed as it
came, not re-chunked; a HEAD answer keeps the length of the body it describes), and no
Content-Type is added where the replica sent none. A client that disconnects cancels its
request's handler (and with it the request to the replica); one that is gone when its answer is
written ends the handler quietly.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import hdrs, web

from corral.serve.proxy.gateway import Gateway, Message
from corral.serve.proxy.hangup import CANCELS_ON_DISCONNECT

log = logging.getLogger(__name__)
# New connections the system queues for the gateway, as uvicorn (the head's server) asks; asyncio's
# default of 100 would let a burst of clients overflow it (see ``accept`` for what that costs).
BACKLOG = 2048


def _target(request: web.BaseRequest) -> tuple[str, bytes]:
    """The path and the query string exactly as the client sent them."""
    raw = request.raw_path
    if not raw.startswith("/"):  # absolute form (http://host/path): the path part, still encoded
        raw = request.rel_url.raw_path_qs
    path, _, query = raw.partition("?")
    return path, query.encode("latin-1")


def _scope(request: web.BaseRequest) -> dict[str, Any]:
    path, query = _target(request)
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    return {
        "type": "http",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": path.encode("latin-1"),
        "root_path": "",
        "query_string": query,
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None,
        "extensions": {CANCELS_ON_DISCONNECT: {}},  # serve() has aiohttp cancel the handler then
    }


async def _no_default_type(response: web.StreamResponse, prepare: Callable[[], Awaitable[None]]) -> None:
    typed = hdrs.CONTENT_TYPE in response.headers
    await prepare()
    if not typed:  # aiohttp adds application/octet-stream to a body without a type
        response.headers.popall(hdrs.CONTENT_TYPE, None)


class _Streamed(web.StreamResponse):
    async def _prepare_headers(self) -> None:
        await _no_default_type(self, super()._prepare_headers)


class _Whole(web.Response):
    async def _prepare_headers(self) -> None:
        await _no_default_type(self, super()._prepare_headers)


class _Exchange:
    """One request's ASGI ``receive`` and ``send`` over aiohttp's request and response."""

    def __init__(self, request: web.BaseRequest) -> None:
        self.request = request
        self.start: dict[str, Any] = {}
        self.response: web.StreamResponse | None = None
        self.finished = False
        self.body_read = False

    async def receive(self) -> Message:
        if self.body_read:  # as ASGI has it, wait for a disconnect: aiohttp then cancels the handler
            await asyncio.get_running_loop().create_future()
        try:
            chunk = await self.request.content.readany()
        except Exception:  # the client went away mid-body (a reset, or fewer bytes than it announced)
            return {"type": "http.disconnect"}
        self.body_read = self.request.content.at_eof()
        return {"type": "http.request", "body": chunk, "more_body": not self.body_read}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.start = {"status": message["status"], "headers": _headers(message["headers"])}
            return
        chunk = message.get("body", b"")
        self.finished = not message.get("more_body", False)
        try:
            if self.response is None and self.finished:
                self.response = _Whole(body=chunk, **self.start)  # whole: written in one go on return
                return
            if self.response is None:
                self.response = _Streamed(**self.start)
                await self.response.prepare(self.request)
            if chunk:
                await self.response.write(chunk)
        except ConnectionError as exc:  # raised as a plain OSError, as ASGI asks, not as aiohttp's ClientError
            raise ConnectionResetError("the client closed its connection") from exc

    def result(self) -> web.StreamResponse:
        """What the handler returns: aiohttp finishes it (and bears a client gone by then quietly)."""
        if self.response is None:
            return _Whole(**self.start)
        if not self.finished and self.request.transport is not None:
            self.request.transport.close()  # the answer cannot be finished: cut the connection, as uvicorn does
        return self.response


async def _handle(gateway: Gateway, request: web.BaseRequest) -> web.StreamResponse:
    exchange = _Exchange(request)
    try:
        await gateway(_scope(request), exchange.receive, exchange.send)
    except ConnectionResetError:
        log.debug("client %s went away before its answer was sent", request.remote)
    return exchange.result()


def _headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]


async def serve(gateway: Gateway, sock: socket.socket) -> None:
    """Serve until cancelled."""
    server = web.Server(lambda request: _handle(gateway, request), access_log=None, handler_cancellation=True)
    loop = asyncio.get_running_loop()
    await gateway.start()
    listener = await loop.create_server(server, sock=sock, backlog=BACKLOG)
    try:
        await asyncio.Event().wait()
    finally:
        listener.close()
        await server.shutdown(3.0)
        await gateway.close()
