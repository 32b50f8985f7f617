"""The gateway's wire work: the replica's URL for a request, the request's body and headers, and
passing a replica's response on (whole or streamed), or a reply of the gateway's own.

Paths and query strings go to the replica exactly as the client sent them: no decoding, no
re-encoding, no merging of slashes (a signed URL must reach the replica byte for byte).
"""

from __future__ import annotations

import functools
import io
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import aiohttp
from yarl import URL

log = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

REPLICA_HEADER = b"x-corral-replica"
# Hop-by-hop headers belong to one connection, not to the request or response being passed on.
HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te", b"trailer", b"upgrade"}
)
HOP_AND_HOST = HOP | {b"host"}
HOP_AND_OURS = HOP | {REPLICA_HEADER}
WHOLE_BODY_MAX = 256 * 1024
LARGE_BODY = 1 << 20  # a request body larger than this is written out in pieces
# What a replica can do wrong once it has the request: close, reset, stall or cut its answer short.
REPLICA_ERRORS = (aiohttp.ClientError, TimeoutError)


@functools.lru_cache(maxsize=4096)
def _origin(url: str) -> tuple[str, str]:
    parsed = URL(url)
    return parsed.scheme, parsed.raw_authority


def target(replica_url: str, path: str, query: str) -> URL:
    """The replica's URL for ``path`` and ``query`` as received (percent-escapes and all)."""
    scheme, authority = _origin(replica_url)
    return URL.build(scheme=scheme, authority=authority, path=path, query_string=query, encoded=True)


def request_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw if k not in HOP_AND_HOST]


def body_data(body: bytes) -> bytes | io.BytesIO | None:
    """What to hand aiohttp for one attempt: large bodies as a file, which it writes in pieces
    without holding the event loop."""
    if not body:
        return None
    return io.BytesIO(body) if len(body) > LARGE_BODY else body


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client went away before sending all of it."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def pass_on(response: aiohttp.ClientResponse, send: Send, replica: str, service: str) -> None:
    """Send the replica's response to the client. If the replica fails before the client has the
    status line, the client gets a 502 naming it; if it fails after, the response is left
    unfinished, and the server then cuts the client's connection (a proxy cannot honestly finish
    a response the replica did not)."""
    headers = [(k.lower(), v) for k, v in response.raw_headers if k.lower() not in HOP_AND_OURS]
    headers.append((REPLICA_HEADER, replica.encode()))  # ours alone: a replica's own is dropped
    start = {"type": "http.response.start", "status": response.status, "headers": headers}
    length = response.content_length
    if length is not None and length <= WHOLE_BODY_MAX:
        # A small body of known length goes out in one message: one write instead of two or three
        # (each write is a system call, the largest cost of a proxied request).
        try:
            body = await response.read()
        except REPLICA_ERRORS as exc:
            log.warning("replica %s of %s cut its response short: %s", replica, service, _describe(exc))
            await reply(send, 502, f"service {service!r}: replica {replica} cut its response short", replica)
            return
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    await send(start)
    # Anything else (chunked, server-sent events, large) streams as it arrives.
    try:
        async for chunk in response.content.iter_any():
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except REPLICA_ERRORS as exc:
        log.warning("replica %s of %s cut its response short: %s", replica, service, _describe(exc))
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


async def reply(send: Send, status: int, message: str, replica: str | None = None) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if replica is not None:
        headers.append((REPLICA_HEADER, replica.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
