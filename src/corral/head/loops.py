"""Background loops: each one loads state, decides, and applies the decision in a guarded write."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from corral.head import lateness
from corral.head.runtime import HeadRuntime
from corral.head.services.accounting import meter
from corral.head.services.agents import write_heard
from corral.head.services.idle import check_idle
from corral.head.services.liveness import check_nodes, check_time_limits, end_fenced_failures
from corral.head.services.scheduling import run_cycle
from corral.head.services.serving_loop import run_round
from corral.sched import Policy
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.probe import Prober

log = logging.getLogger(__name__)
MIN_PACED_CYCLE_S = 0.005  # cycles shorter than this run back to back


async def schedule_loop(rt: HeadRuntime, policy: Policy) -> None:
    """Run a cycle whenever something changed (submit, exit, node) and at least every interval.

    Every cycle counts running jobs' service up to its own time, so a job that crosses one of the
    policy's ``thresholds`` is seen past it within an interval, with no other event.

    Under a stream of changes, cycles are paced so that they take at most about half of the
    head's time: a cycle over a long queue must not starve the API that feeds it.
    """
    assert rt.notifier is not None
    wanted = rt.notifier.schedule_wanted
    rt.service.reset()  # a head that starts leading loads the finished jobs again: it may have missed some
    while True:
        wanted.clear()
        started = time.perf_counter()
        try:
            await asyncio.to_thread(run_cycle, rt, policy)
        except Exception:
            log.exception("scheduling cycle failed")
        took = time.perf_counter() - started
        rt.on_cycle(took)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(rt.settings.schedule_interval_s):
                await wanted.wait()
        if took > MIN_PACED_CYCLE_S:
            await asyncio.sleep(took)


async def liveness_loop(rt: HeadRuntime, interval_s: float = 1.0) -> None:
    """Runs while this head leads; nodes are judged on their silence since it began to, or since it
    last stalled: a head that was stopped or paused has not read the heartbeats sent meanwhile, and a
    silence it did not hear is no node's. Shorter stalls of the event loop are measured as they happen
    and taken off each node's silence (``corral.head.lateness``)."""
    watching_since = rt.clock.now()
    stall_s = interval_s + max(2.0, rt.settings.node_timeout_s / 4)
    last = time.monotonic()
    probe = asyncio.create_task(lateness.probe(rt.lateness))  # shorter stalls are taken off each node's silence
    try:
        while True:
            if (gap := time.monotonic() - last) > stall_s:
                log.warning("the head did not run for %.1fs: node silence counts again from now", gap)
                watching_since = rt.clock.now()
            try:
                await asyncio.to_thread(check_nodes, rt, watching_since)
                await asyncio.to_thread(check_time_limits, rt)
                await asyncio.to_thread(end_fenced_failures, rt)
            except Exception:
                log.exception("liveness check failed")
            last = time.monotonic()
            await asyncio.sleep(interval_s)
    finally:
        probe.cancel()


async def heard_loop(rt: HeadRuntime) -> None:
    """Write the last-heard times of heartbeats answered from memory, in one batch a moment
    (a quarter of the node timeout, at most a second: a node is never declared lost for want of it)."""
    interval_s = min(1.0, rt.settings.node_timeout_s / 4)
    try:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await asyncio.to_thread(write_heard, rt)
            except Exception:
                log.exception("writing heartbeat times failed")
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(write_heard, rt)


async def serve_loop(rt: HeadRuntime, book: LoadBook, wake: asyncio.Event, interval_s: float = 0.5) -> None:
    """Keep every service's replicas at the count its autoscaler wants; probe their readiness.
    A request waiting for a replica (a service scaled to zero) wakes it at once."""
    prober = Prober()
    try:
        while True:
            wake.clear()
            try:
                await run_round(rt, book, prober)
            except Exception:
                log.exception("serve round failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval_s):
                    await wake.wait()
    finally:
        await prober.aclose()


async def meter_loop(rt: HeadRuntime) -> None:
    """Store the GPUs' energy per job every meter interval (accounting), and once more on the way out."""
    try:
        while True:
            await asyncio.sleep(rt.settings.meter_interval_s)
            try:
                await asyncio.to_thread(meter, rt)
            except Exception:
                log.exception("energy metering failed")
    finally:
        try:
            await asyncio.to_thread(meter, rt)
        except Exception:
            log.exception("energy metering failed at shutdown")


async def idle_loop(rt: HeadRuntime, interval_s: float = 15.0) -> None:
    """Flag (and, where configured, warn then cancel) jobs whose GPUs stay idle."""
    while rt.settings.idle_after_s is not None:
        await asyncio.sleep(min(interval_s, rt.settings.idle_after_s / 4))
        try:
            await asyncio.to_thread(check_idle, rt)
        except Exception:
            log.exception("idle GPU check failed")
