"""Serve the gateway (an ASGI app) on aiohttp's HTTP server: the lean server for `corral gateway`.

aiohttp parses HTTP in C and writes a whole response (headers and body) in one system call,
where uvicorn with its pure-Python parser writes the headers and the body separately;
docs/benchmarks.md has the figures. Only what the gateway uses of ASGI is supported: the
request body in pieces as it arrives (no size limit, as under uvicorn), and a response that is
either whole or streamed. A streamed response the gateway leaves unfinished (its replica died
mid-way) cuts the client's connection, as uvicorn does.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web

from corral.serve.proxy.gateway import Gateway, Message


def _target(request: web.BaseRequest) -> tuple[str, bytes]:
    """The path and the query string exactly as the client sent them."""
    raw = request.raw_path
    if not raw.startswith("/"):  # absolute form (http://host/path): the path part, still encoded
        raw = request.rel_url.raw_path_qs
    path, _, query = raw.partition("?")
    return path, query.encode("latin-1")


async def _handle(gateway: Gateway, request: web.BaseRequest) -> web.StreamResponse:
    path, query = _target(request)
    scope = {
        "type": "http",
        "method": request.method,
        "path": request.path,
        "raw_path": path.encode("latin-1"),
        "root_path": "",
        "query_string": query,
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
    }
    start: dict[str, Any] = {}
    stream: web.StreamResponse | None = None
    finished = False

    async def receive() -> Message:
        try:
            chunk = await request.content.readany()
        except Exception:  # the client went away mid-body (a reset, or fewer bytes than it announced)
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": chunk, "more_body": not request.content.at_eof()}

    async def send(message: Message) -> None:
        nonlocal stream, finished
        if message["type"] == "http.response.start":
            start.update(status=message["status"], headers=_headers(message["headers"]))
            return
        finished = not message.get("more_body", False)
        if stream is None and finished:
            stream = web.Response(body=message.get("body", b""), **start)  # whole: one write
            return
        if stream is None:
            stream = web.StreamResponse(**start)
            await stream.prepare(request)
        chunk = message.get("body", b"")
        if chunk:
            await stream.write(chunk)

    await gateway(scope, receive, send)
    if isinstance(stream, web.Response) or stream is None:
        return stream if stream is not None else web.Response(**start)
    if not finished and request.transport is not None:
        request.transport.close()  # the answer cannot be finished: cut the connection, as uvicorn does
        return stream
    await stream.write_eof()
    return stream


def _headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    # aiohttp sets these itself from the body it writes.
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k not in (b"content-length",)]


async def serve(gateway: Gateway, sock: socket.socket) -> None:
    """Serve until cancelled."""
    server = web.Server(lambda request: _handle(gateway, request), access_log=None)
    loop = asyncio.get_running_loop()
    await gateway.start()
    listener = await loop.create_server(server, sock=sock)
    try:
        await asyncio.Event().wait()
    finally:
        listener.close()
        await server.shutdown(3.0)
        await gateway.close()
