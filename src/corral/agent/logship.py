"""Ship each rank's log file to the head in chunks, resuming where the head's copy ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corral.client.agent_api import AgentApi
from corral.client.errors import ConflictError, CorralError

log = logging.getLogger(__name__)
CHUNK = 512 * 1024
# A heartbeat ships the logs of the tasks it reports ended for at most this long; the ends of those it had
# no time for wait for a later beat, so thousands of tasks ending together never hold the heartbeat.
EXIT_LOGS_BUDGET_S = 1.0


@dataclass
class LogShipper:
    path: Path
    job_id: str
    generation: int
    rank: int
    offset: int = 0
    # One shipment of this log at a time (the periodic pass and a heartbeat may both ship it), and no
    # more: a heartbeat never waits for the other tasks' logs.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)

    async def ship(self, api: AgentApi, node: str) -> bool:
        """Send what is new; True if everything written so far has reached the head."""
        async with self.lock:
            return await self._ship(api, node)

    def shipped_all(self) -> bool:
        """Whether everything written so far has reached the head (a shipment in progress does not count)."""
        try:
            return self.path.stat().st_size <= self.offset and not self.lock.locked()
        except FileNotFoundError:
            return True

    async def _ship(self, api: AgentApi, node: str) -> bool:
        while True:
            try:
                with self.path.open("rb") as handle:
                    handle.seek(self.offset)
                    data = handle.read(CHUNK)
            except FileNotFoundError:
                return True
            if not data:
                return True
            try:
                self.offset = await api.ship_logs(node, self.job_id, self.generation, self.rank, self.offset, data)
            except ConflictError:
                self.offset = 0  # the head lost part of its copy: send it all again
            except CorralError as exc:
                log.warning("could not ship logs of %s rank %d: %s", self.job_id, self.rank, exc)
                return False


async def ship_within(
    tasks: Iterable[tuple[str, Sequence[LogShipper]]], api: AgentApi, node: str, budget_s: float
) -> set[str]:
    """Ship the logs of the given tasks, in order, until ``budget_s`` has passed; answers the tasks whose
    logs have not all reached the head by then. (A task whose shipment failed counts as shipped: the failure
    is logged, and a head that refuses its log must still hear how it ended.)"""
    deadline = time.monotonic() + budget_s
    left: set[str] = set()
    for task_id, shippers in tasks:
        if time.monotonic() >= deadline:
            if not all(shipper.shipped_all() for shipper in shippers):
                left.add(task_id)
            continue
        for shipper in shippers:
            await shipper.ship(api, node)
    return left
