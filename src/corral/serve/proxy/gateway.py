"""The gateway: an ASGI app that proxies ``/s/SERVICE/PATH`` to a ready replica of SERVICE.

It picks the replica with the least-outstanding-requests policy, passes the response through as
it arrives (chunked bodies and server-sent events are not buffered) and names the replica in
``X-Corral-Replica``. A request goes to a second replica only when the connection to the first
could not be made (refused, or not accepted: see ``accept``), so a request that reached a replica
is never sent twice. A request to a service without a ready replica (scaled to zero, or still
starting) is held up to the service's ``readiness.hold`` and then answered 503. A request whose
client disconnects stops at once, wherever it is: held, sent, or streaming its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, MutableMapping, Sequence
from typing import Any
from urllib.parse import unquote

import aiohttp
from yarl import URL

from corral.api.services import Endpoint
from corral.serve.proxy.accept import ACCEPT_S, WATCH, Watch, WatchingConnector
from corral.serve.proxy.hangup import CANCELS_ON_DISCONNECT, unless_gone
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool
from corral.serve.proxy.relay import (
    REPLICA_ERRORS,
    REPLICA_HEADER,
    Message,
    Receive,
    Send,
    body_data,
    pass_on,
    read_body,
    reply,
    request_headers,
    target,
)

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Headers = list[tuple[str, str]]
__all__ = ["REPLICA_HEADER", "Gateway", "Message", "Receive", "Scope", "Send"]

# Raised before a byte of the request was written: the request provably never reached a replica.
_CONNECT_ERRORS = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
# Shorter than the keep-alive timeouts of common servers (uvicorn: 5 s): the gateway drops an
# idle connection before the replica does, rather than sending a request into a closing one.
KEEPALIVE_S = 4.0
# Connections one gateway keeps to one replica; more requests wait at the gateway for one of them.
# A burst then never opens more connections at once than a listen queue holds: 100 is asyncio's
# default backlog, and most servers (uvicorn, gunicorn, werkzeug, aiohttp, Node) take 128 or more.
REPLICA_CONNECTIONS = 100


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
                connector=WatchingConnector(
                    limit=1000, limit_per_host=REPLICA_CONNECTIONS, keepalive_timeout=KEEPALIVE_S
                ),
                # Only the socket connect is bounded tightly: a busy gateway's own wait is not the replica's fault.
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=3.0, sock_read=300.0),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
            # aiohttp sends an idempotent request (GET, PUT, DELETE, ...) a second time, on a new
            # connection, when a kept-alive one fails, although the replica may have had it; the
            # gateway decides on retries itself. (aiohttp's own test client turns this off the same way.)
            self._http._retry_connection = False
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
            await reply(send, 404, f"no service in the path: use {self.prefix}/SERVICE/...")
            return
        self.book.started(service)
        try:
            await self._proxy(scope, receive, send, service, path)
        finally:
            self.book.finished(service)

    def _split(self, scope: Scope) -> tuple[str | None, str]:
        """The service and the rest of the path, as the client sent it (``raw_path``, not decoded)."""
        raw: bytes | None = scope.get("raw_path")
        path = raw.decode("latin-1") if raw else scope["path"]
        root = scope.get("root_path", "")
        if not path.startswith((root or self.prefix) + "/"):  # the prefix itself was escaped (/%73/...)
            path = scope["path"]
        if root and path.startswith(root):
            path = path[len(root) :]
        elif path.startswith(self.prefix + "/"):
            path = path[len(self.prefix) :]
        service, _, rest = path.lstrip("/").partition("/")
        return (unquote(service) or None), "/" + rest

    async def _proxy(self, scope: Scope, receive: Receive, send: Send, service: str, path: str) -> None:
        try:
            known = await self.pool.look_up(service, since=time.monotonic())
        except Exception as exc:  # the head restarting: answer with what the gateway knows
            self.pool.refresh_failures.failed(exc)
            known = service in self.pool.services
        if not known:
            await reply(send, 404, f"no service {service!r}; `corral services` lists them")
            return
        if self.pool.services[service].stopped:
            await reply(send, 503, _scaled_to_zero(service))
            return
        body = await read_body(receive)
        if body is None:
            return  # the client went away before sending the whole request
        work = self._route(scope, send, service, path, body)
        if CANCELS_ON_DISCONNECT in (scope.get("extensions") or ()):
            await work
        elif await unless_gone(work, receive):
            log.debug("a client of %s went away before its answer: its request was dropped", service)

    async def _route(self, scope: Scope, send: Send, service: str, path: str, body: bytes) -> None:
        endpoint = self.pool.choose(service) or await self._held_for(send, service)
        if endpoint is not None:
            await self._forward(scope, send, service, path, body, endpoint)

    async def _held_for(self, send: Send, service: str) -> Endpoint | None:
        """Hold the request until a replica is ready; None (the request answered) when none comes."""
        held_since = time.monotonic()
        endpoint = await self._hold(service)
        if endpoint is None:
            await self._no_replica(send, service, time.monotonic() - held_since)
        return endpoint

    async def _no_replica(self, send: Send, service: str, waited_s: float) -> None:
        """The answer to a request held for a replica that none came to serve."""
        pool = self.pool.services.get(service)
        if pool is None:
            await reply(send, 404, f"service {service!r} was deleted while the request waited for a replica")
        elif pool.stopped:
            await reply(send, 503, _scaled_to_zero(service))
        else:
            await reply(
                send,
                503,
                f"service {service!r} has no ready replica after waiting {waited_s:.0f}s "
                "(it may be starting from zero, or its replicas fail their readiness check); try again",
            )

    async def _forward(
        self, scope: Scope, send: Send, service: str, path: str, body: bytes, endpoint: Endpoint
    ) -> None:
        query = scope.get("query_string", b"").decode("latin-1")
        client = scope.get("client")
        headers = request_headers(scope["headers"], client[0] if client else None, scope.get("scheme", "http"))
        tried: frozenset[str] = frozenset()
        for attempt in range(2):
            self._outstanding(service, endpoint.replica, 1)
            try:
                url = target(endpoint.url, path, query)
                if await self._send_to(send, service, endpoint, scope["method"], url, headers, body):
                    return
            finally:
                self._outstanding(service, endpoint.replica, -1)
            # No connection: the request never left the gateway.
            self.pool.refused(endpoint.replica)
            tried |= {endpoint.replica}
            if attempt > 0:
                message = f"service {service!r}: replica {endpoint.replica} is unreachable"
                await reply(send, 502, message, endpoint.replica)
                return
            # Another ready replica, else held as if none were ready (the refused one waits out its cooldown).
            retry = self.pool.choose(service, exclude=tried) or await self._held_for(send, service)
            if retry is None:
                return  # answered: no replica came
            endpoint = retry

    async def _send_to(
        self, send: Send, service: str, endpoint: Endpoint, method: str, url: URL, headers: Headers, body: bytes
    ) -> bool:
        """Send the request to ``endpoint`` and its answer (or a 502) to the client; False, with
        nothing sent to either, when no connection to the replica could be made."""
        watch = Watch()
        token = WATCH.set(watch)
        try:
            data = body_data(body)
            response = await self.http.request(method, url, headers=headers, data=data, allow_redirects=False)
        except _CONNECT_ERRORS as exc:
            log.info("replica %s of %s refused a connection (%s)", endpoint.replica, service, exc)
            return False
        except REPLICA_ERRORS as exc:
            if watch.unaccepted:
                log.info("replica %s of %s did not accept a connection in %gs", endpoint.replica, service, ACCEPT_S)
                return False
            log.warning("replica %s of %s failed before answering: %s", endpoint.replica, service, exc)
            message = f"service {service!r}: replica {endpoint.replica} failed: {exc}"
            await reply(send, 502, message, endpoint.replica)  # it may have had the request: never sent again
            return True
        finally:
            watch.disarm()
            WATCH.reset(token)
        try:
            await pass_on(response, send, endpoint.replica, service)
        finally:
            response.release()
        return True

    def _outstanding(self, service: str, replica: str, delta: int) -> None:
        self.pool.outstanding[replica] = self.pool.outstanding.get(replica, 0) + delta
        self.book.on_replica(service, replica, delta)

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


def _scaled_to_zero(service: str) -> str:
    return f"service {service!r} is scaled to 0 replicas; `corral service scale` starts it"
