"""Background loops: each one loads state, decides, and applies the decision in a guarded write."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from corral.head.runtime import HeadRuntime
from corral.head.services.liveness import check_nodes, check_time_limits
from corral.head.services.scheduling import run_cycle
from corral.sched import Policy

log = logging.getLogger(__name__)


async def schedule_loop(rt: HeadRuntime, policy: Policy) -> None:
    """Run a cycle whenever something changed (submit, exit, node) and at least every interval."""
    assert rt.notifier is not None
    wanted = rt.notifier.schedule_wanted
    while True:
        wanted.clear()
        try:
            await asyncio.to_thread(run_cycle, rt, policy)
        except Exception:
            log.exception("scheduling cycle failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wanted.wait(), rt.settings.schedule_interval_s)


async def liveness_loop(rt: HeadRuntime, interval_s: float = 1.0) -> None:
    while True:
        try:
            await asyncio.to_thread(check_nodes, rt)
            await asyncio.to_thread(check_time_limits, rt)
        except Exception:
            log.exception("liveness check failed")
        await asyncio.sleep(interval_s)
