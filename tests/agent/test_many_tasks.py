"""Thousands of tasks handed out at once (a large array of CPU-only jobs) start a few at a time, so the
agent's event loop, which runs its heartbeat and lease check, is never held for long."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from corral.agent import launch
from corral.agent.tasks import STARTS_AT_ONCE, TaskSet
from corral.api import DesiredTask

pytestmark = pytest.mark.timeout(60)


def _desired(tmp_path: Path, i: int, command: str) -> DesiredTask:
    return DesiredTask(
        task_id=f"j-{i}/0/0",
        job_id=f"j-{i}",
        generation=0,
        node_rank=0,
        command=command,
        launcher="per-node",
        gpus=[],
        env={},
        rank_offset=0,
        processes=1,
        checkpoint_dir=str(tmp_path / "ckpt" / f"j-{i}"),
        grace_s=0.0,
    )


async def _until_all_exited(tasks: TaskSet, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while any(local.state != "EXITED" for local in tasks.tasks.values()):
        assert time.monotonic() < deadline, "tasks did not all end"
        await asyncio.sleep(0.05)


def test_a_thousand_tasks_at_once_never_hold_the_event_loop(tmp_path):
    count = 1000

    async def scenario() -> tuple[float, list[str], list[tuple[str, int | None]]]:
        tasks = TaskSet("n1", tmp_path / "work", asyncio.Event(), launch.DescendantTracker())
        longest, running = 0.0, True

        async def ticker() -> None:  # stands in for the heartbeat and the lease check
            nonlocal longest
            last = time.monotonic()
            while running:
                await asyncio.sleep(0.02)
                now = time.monotonic()
                longest, last = max(longest, now - last - 0.02), now

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        tasks.reconcile([_desired(tmp_path, i, "true") for i in range(count)])
        await asyncio.sleep(0.05)
        early = [r.state for r in tasks.reports()]
        try:
            await _until_all_exited(tasks, 45)
        finally:
            running = False
            await ticking
            await tasks.stop_all("test over")
        ends = [(r.state, r.exit_code) for r in tasks.reports(hold_exit=False)]
        return longest, early, ends

    longest, early, ends = asyncio.run(scenario())
    # Forking them all in one turn of the loop held it about a millisecond per task, and more under load.
    assert longest < 0.4, f"the event loop was held for {longest:.2f}s"
    assert len(early) == count, "every task is reported from the start"
    assert early.count("STARTING") > count / 2, "those waiting for their turn are reported starting"
    assert ends == [("EXITED", 0)] * count


def test_a_task_stopped_while_it_waits_for_its_turn_never_starts(tmp_path):
    count = 4 * STARTS_AT_ONCE

    async def scenario() -> list[tuple[str, int | None, str, bool]]:
        tasks = TaskSet("n1", tmp_path / "work", asyncio.Event(), launch.DescendantTracker())
        tasks.reconcile([_desired(tmp_path, i, "sleep 30") for i in range(count)])
        tasks.reconcile([])  # the head no longer wants any of them
        try:
            await _until_all_exited(tasks, 30)
        finally:
            await tasks.stop_all("test over")
        return [
            (r.state, r.exit_code, r.detail, tasks.tasks[r.task_id].task_dir.exists())
            for r in tasks.reports(hold_exit=False)
        ]

    ended = asyncio.run(scenario())
    assert {state for state, *_ in ended} == {"EXITED"}
    never = [(code, detail) for _, code, detail, started in ended if not started]
    # At most the first few had begun to start; the others left no directory, process or exit status.
    assert len(never) >= count - STARTS_AT_ONCE
    assert set(never) == {(None, "stopped: the head no longer wants it")}


def test_reaping_orphans_during_a_stream_of_starts_leaves_task_exits_alone(tmp_path, reaping_meanwhile):
    """A task that exits at once is a zombie for a moment before its start has recorded it: the orphan
    reaper, which runs in a thread meanwhile, must not take its exit status (asyncio then reports 255)."""
    count = 300

    async def scenario() -> list[tuple[str, int | None]]:
        tasks = TaskSet("n1", tmp_path / "work", asyncio.Event(), launch.DescendantTracker())
        tasks.reconcile([_desired(tmp_path, i, "true") for i in range(count)])
        try:
            await _until_all_exited(tasks, 45)
        finally:
            await tasks.stop_all("test over")
        return [(r.state, r.exit_code) for r in tasks.reports(hold_exit=False)]

    ends = asyncio.run(scenario())
    assert ends == [("EXITED", 0)] * count
