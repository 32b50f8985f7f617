"""The gateway: an ASGI app that proxies ``/s/SERVICE/PATH`` to a ready replica of SERVICE.

It picks the replica with the least-outstanding-requests policy, retries once on another
replica when the connection fails, passes the response through as it arrives (chunked bodies
and server-sent events are not buffered) and names the replica in ``X-Corral-Replica``. A
request to a service without a ready replica (scaled to zero, or still starting) is held up to
the service's ``readiness.hold`` and then answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from typing import Any

import aiohttp

from corral.api.services import Endpoint
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

REPLICA_HEADER = b"x-corral-replica"
# Hop-by-hop headers belong to one connection, not to the request or response being passed on.
_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te", b"trailer", b"upgrade"}
_HOP_AND_HOST = _HOP | {b"host"}
WHOLE_BODY_MAX = 256 * 1024
_CONNECT_ERRORS = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)


class Gateway:
    def __init__(
        self,
        pool: ReplicaPool,
        book: LoadBook,
        prefix: str = "/s",
        background: Sequence[Callable[[], Coroutine[Any, Any, None]]] = (),
    ) -> None:
        self.pool = pool
        self.background = background
        self._tasks: list[asyncio.Task[None]] = []
        self.book = book
        self.prefix = prefix
        self._http: aiohttp.ClientSession | None = None

    @property
    def http(self) -> aiohttp.ClientSession:
        """The client for replicas: aiohttp, which keeps its speed under many concurrent requests
        (see docs/benchmarks.md); created on first use, inside the running event loop."""
        if self._http is None:
            self._http = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0),
                # Only the socket connect is bounded tightly: a busy gateway's own wait is not the replica's fault.
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=3.0, sock_read=300.0),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return self._http

    async def start(self) -> None:
        self.pool.start()
        self._tasks = [asyncio.create_task(job()) for job in self.background]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.pool.close()
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        service, path = self._split(scope)
        if service is None:
            await _reply(send, 404, f"no service in the path: use {self.prefix}/SERVICE/...")
            return
        self.book.started(service)
        try:
            await self._proxy(scope, receive, send, service, path)
        finally:
            self.book.finished(service)

    def _split(self, scope: Scope) -> tuple[str | None, str]:
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        elif path.startswith(self.prefix + "/"):
            path = path[len(self.prefix) :]
        service, _, rest = path.lstrip("/").partition("/")
        return (service or None), "/" + rest

    async def _proxy(self, scope: Scope, receive: Receive, send: Send, service: str, path: str) -> None:
        try:
            known = await self.pool.look_up(service, since=time.monotonic())
        except Exception as exc:  # the head restarting: answer with what the gateway knows
            log.warning("cannot refresh the gateway's replicas: %s", exc)
            known = service in self.pool.services
        if not known:
            await _reply(send, 404, f"no service {service!r}; `corral services` lists them")
            return
        if self.pool.services[service].stopped:
            await _reply(send, 503, f"service {service!r} is scaled to 0 replicas; `corral service scale` starts it")
            return
        body = await _read_body(receive)
        endpoint = self.pool.choose(service)
        if endpoint is None:
            endpoint = await self._hold(service)
            if endpoint is None:
                hold = self.pool.services[service].hold_s if service in self.pool.services else 0
                await _reply(
                    send,
                    503,
                    f"service {service!r} has no ready replica after waiting {hold:g}s "
                    "(it may be starting from zero, or its replicas fail their readiness check); try again",
                )
                return
        query = scope.get("query_string", b"")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k not in _HOP_AND_HOST]
        tried: frozenset[str] = frozenset()
        for attempt in range(2):
            url = endpoint.url + path + ("?" + query.decode("latin-1") if query else "")
            self._outstanding(endpoint.replica, 1)
            try:
                response = await self.http.request(
                    scope["method"], url, headers=headers, data=body, allow_redirects=False
                )
            except _CONNECT_ERRORS as exc:
                self._outstanding(endpoint.replica, -1)
                self.pool.refused(endpoint.replica)
                tried |= {endpoint.replica}
                retry = self.pool.choose(service, exclude=tried) if attempt == 0 else None
                log.info("replica %s of %s refused a connection (%s)", endpoint.replica, service, exc)
                if retry is None:
                    await _reply(send, 502, f"service {service!r}: replica {endpoint.replica} is unreachable")
                    return
                endpoint = retry
                continue
            except (aiohttp.ClientError, TimeoutError) as exc:
                self._outstanding(endpoint.replica, -1)
                await _reply(send, 502, f"service {service!r}: replica {endpoint.replica} failed: {exc}")
                return
            try:
                await _pass_on(response, send, endpoint)
            finally:
                self._outstanding(endpoint.replica, -1)
                response.release()
            return

    def _outstanding(self, replica: str, delta: int) -> None:
        self.pool.outstanding[replica] = self.pool.outstanding.get(replica, 0) + delta

    async def _hold(self, service: str) -> Endpoint | None:
        self.book.waiting(service, 1)
        try:
            return await self.pool.wait_for_replica(service, self.pool.services[service].hold_s)
        finally:
            self.book.waiting(service, -1)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _pass_on(response: aiohttp.ClientResponse, send: Send, endpoint: Endpoint) -> None:
    headers = [(k.lower(), v) for k, v in response.raw_headers if k.lower() not in _HOP]
    headers.append((REPLICA_HEADER, endpoint.replica.encode()))
    start = {"type": "http.response.start", "status": response.status, "headers": headers}
    length = response.content_length
    if length is not None and length <= WHOLE_BODY_MAX:
        # A small body of known length goes out in one message: one write instead of two or three
        # (each write is a system call, the largest cost of a proxied request).
        body = await response.read()
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})
        return
    await send(start)
    # Anything else (chunked, server-sent events, large) streams as it arrives. A replica that dies
    # mid-response raises here: the server then cuts the client's connection, which is all a proxy
    # can honestly say about a response it cannot finish.
    async for chunk in response.content.iter_any():
        if chunk:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _reply(send: Send, status: int, message: str) -> None:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
