"""Wake-ups inside the head: node desired-state versions and the scheduler's doorbell.

Services run in worker threads; waiters are coroutines on the event loop. Every
method that changes state is safe to call from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


class Notifier:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._versions: dict[str, int] = {}
        self._node_events: dict[str, asyncio.Event] = {}
        self.schedule_wanted = asyncio.Event()

    def nodes_changed(self, versions: Iterable[tuple[str, int]]) -> None:
        items = list(versions)
        if items:
            self._loop.call_soon_threadsafe(self._set_versions, items)

    def wake_scheduler(self) -> None:
        self._loop.call_soon_threadsafe(self.schedule_wanted.set)

    def _set_versions(self, items: list[tuple[str, int]]) -> None:
        for node, version in items:
            if version > self._versions.get(node, -1):  # versions only grow; a late report of an old one is no news
                self._versions[node] = version
                event = self._node_events.pop(node, None)
                if event is not None:
                    event.set()

    def wake_all(self) -> None:
        """Wake every long poll (the head is stopping: they answer now rather than be cut off). On the loop."""
        events, self._node_events = self._node_events, {}
        for event in events.values():
            event.set()

    def known_version(self, node: str) -> int | None:
        return self._versions.get(node)

    async def wait_for_change(self, node: str, after: int, current: int, timeout_s: float) -> None:
        """Return when the node's version differs from ``after``, or on timeout."""
        if current != after:
            return
        self._versions.setdefault(node, current)
        if self._versions[node] != after:
            return
        event = self._node_events.setdefault(node, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await event.wait()
