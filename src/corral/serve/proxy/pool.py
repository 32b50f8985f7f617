"""The gateway's picture of each service: its ready replicas and the requests each one holds.

The picture is refreshed from the head (every ``interval_s``, and at once while a request waits
for a replica). A gateway in the head's own process is also told when a service changes
(``invalidate``): the next request reads the picture afresh instead of routing by the old one.
A replica that refuses a connection is left out for ``cooldown_s`` without waiting for the head
to notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from corral.api.services import Endpoint, GatewayView
from corral.serve.lb import ReplicaView, RequestView, choose_replica
from corral.serve.proxy.repeated import RepeatedWarning

log = logging.getLogger(__name__)

MIN_REFRESH_S = 0.1
ViewSource = Callable[[], Awaitable[GatewayView]]


@dataclass
class ServicePool:
    ready: list[Endpoint] = field(default_factory=list)
    hold_s: float = 60.0
    stopped: bool = False


class ReplicaPool:
    def __init__(
        self, source: ViewSource, interval_s: float = 0.5, cooldown_s: float = 2.0, seed: int | None = None
    ) -> None:
        self.source = source
        self.interval_s = interval_s
        self.cooldown_s = cooldown_s
        self.services: dict[str, ServicePool] = {}
        self.outstanding: dict[str, int] = {}
        self.refused_until: dict[str, float] = {}
        self.rng = random.Random(seed)
        self.loaded = False
        self.refreshed_at = 0.0
        self.view_asked_at = 0.0  # when the head was asked for the view now in use
        self.changed_at = 0.0  # when the services last changed, as far as the gateway was told
        self._fetch: asyncio.Future[None] | None = None
        self._wanted = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.refresh_failures = RepeatedWarning(log, "cannot refresh the gateway's replicas")

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._refresh_forever(), name="gateway pool refresh")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def update(self, view: GatewayView) -> None:
        self.services = {s.service: ServicePool(list(s.ready), s.hold_s, s.stopped) for s in view.services}
        self.loaded = True
        self.refreshed_at = time.monotonic()
        self._changed.set()
        self._changed = asyncio.Event()

    async def refresh(self) -> None:
        asked_at = time.monotonic()
        view = await self.source()
        if asked_at >= self.view_asked_at:  # a slower, older fetch never replaces a newer view
            self.update(view)
            self.view_asked_at = asked_at

    def invalidate(self) -> None:
        """The services changed (a scale, a delete, replicas leaving the pool): requests from now on
        route by a view asked for after this. Safe to call from any thread."""
        self.changed_at = time.monotonic()

    async def look_up(self, service: str, since: float) -> bool:
        """Whether ``service`` exists, by a view asked for after ``since`` unless the one in use
        already names it (a service the gateway has not heard of may have just been created) and
        is newer than the last change the gateway was told of. Callers waiting together share fetches."""
        while (service not in self.services or self.view_asked_at < self.changed_at) and self.view_asked_at < since:
            if self._fetch is None or self._fetch.done():
                self._fetch = asyncio.ensure_future(self.refresh())
            await asyncio.shield(self._fetch)
        return service in self.services

    async def _refresh_forever(self) -> None:
        while True:
            self._wanted.clear()
            try:
                await self.refresh()
            except Exception as exc:  # the head restarting: keep routing with what we know
                self.refresh_failures.failed(exc)
            else:
                self.refresh_failures.succeeded()
            # Requests held for a replica ask for refreshes; they get at most ten a second.
            await asyncio.sleep(MIN_REFRESH_S)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, self.interval_s - MIN_REFRESH_S)):
                    await self._wanted.wait()

    def choose(self, service: str, exclude: frozenset[str] = frozenset()) -> Endpoint | None:
        pool = self.services.get(service)
        if pool is None or not pool.ready:
            return None
        now = time.monotonic()
        candidates = {e.replica: e for e in pool.ready if self.refused_until.get(e.replica, 0.0) <= now}
        views = [ReplicaView(r, self.outstanding.get(r, 0)) for r in candidates]
        chosen = choose_replica(RequestView(service=service, exclude=exclude), views, self.rng)
        return None if chosen is None else candidates[chosen]

    def refused(self, replica: str) -> None:
        """The replica refused a connection: leave it out for a while."""
        self.refused_until[replica] = time.monotonic() + self.cooldown_s

    async def wait_for_replica(self, service: str, timeout_s: float) -> Endpoint | None:
        """Hold until the service has a ready replica; None once ``timeout_s`` passes, or at once when the
        service is deleted or scaled to 0 meanwhile."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.choose(service)
            left = deadline - time.monotonic()
            if found is not None or left <= 0:
                return found
            pool = self.services.get(service)
            if pool is None or pool.stopped:
                return None
            self._wanted.set()  # refresh now rather than at the next interval
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, self.interval_s)):
                    await changed.wait()
