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


def request_headers(
    raw: Iterable[tuple[bytes, bytes]], client: str | None, scheme: str = "http"
) -> list[tuple[str, str]]:
    """The request's own headers for the replica, with the conventional proxy headers: ``client``
    (the address the request came from) appended to X-Forwarded-For, and X-Forwarded-Host (the
    Host the client asked for) and X-Forwarded-Proto (``scheme``) unless an earlier proxy set them."""
    out: list[tuple[str, str]] = []
    chain: list[str] = []
    host: str | None = None
    has_host = has_proto = False
    for key, value in raw:
        if key == b"x-forwarded-for":
            chain.append(value.decode("latin-1").strip())
        elif key == b"host":
            host = value.decode("latin-1")
        elif key not in HOP:
            has_host = has_host or key == b"x-forwarded-host"
            has_proto = has_proto or key == b"x-forwarded-proto"
            out.append((key.decode("latin-1"), value.decode("latin-1")))
    if client:
        chain.append(client)
    if chain:
        out.append(("x-forwarded-for", ", ".join(chain)))
    if host is not None and not has_host:
        out.append(("x-forwarded-host", host))
    if not has_proto:
        out.append(("x-forwarded-proto", scheme))
    return out


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
    a response the replica did not). An error sending to the client (it went away) is the server's
    to raise: it is not taken for the replica's."""
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
            _cut_short(replica, service, exc)
            await reply(send, 502, f"service {service!r}: replica {replica} cut its response short", replica)
            return
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    await send(start)
    # Anything else (chunked, server-sent events, large) streams as it arrives.
    while True:
        try:
            chunk = await response.content.readany()
        except REPLICA_ERRORS as exc:
            _cut_short(replica, service, exc)
            return
        if not chunk:
            break
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _cut_short(replica: str, service: str, exc: BaseException) -> None:
    log.warning("replica %s of %s cut its response short: %s", replica, service, _describe(exc))


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
