"""Serve the gateway (an ASGI app) on aiohttp's HTTP server: the lean server for `corral gateway`.

aiohttp parses HTTP in C and writes a whole response (headers and body) in one system call,
where uvicorn with its pure-Python parser writes the headers and the body separately;
docs/benchmarks.md has the figures. Only what the gateway uses of ASGI is supported: one
request body read whole, and a response that is either whole or streamed.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from aiohttp import web

from corral.serve.proxy.gateway import Gateway, Message


async def _handle(gateway: Gateway, request: web.BaseRequest) -> web.StreamResponse:
    body = await request.read()
    scope = {
        "type": "http",
        "method": request.method,
        "path": request.path,
        "root_path": "",
        "query_string": request.query_string.encode("latin-1"),
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
    }
    start: dict[str, Any] = {}
    stream: web.StreamResponse | None = None

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal stream
        if message["type"] == "http.response.start":
            start.update(status=message["status"], headers=_headers(message["headers"]))
        elif stream is None and not message.get("more_body", False):
            stream = web.Response(body=message.get("body", b""), **start)  # whole: one write
        else:
            if stream is None:
                stream = web.StreamResponse(**start)
                await stream.prepare(request)
            chunk = message.get("body", b"")
            if chunk:
                await stream.write(chunk)

    await gateway(scope, receive, send)
    if isinstance(stream, web.Response) or stream is None:
        return stream if stream is not None else web.Response(**start)
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
