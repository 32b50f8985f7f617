"""What the agent reports of a task: every task that ran is reported running before its end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.agent import launch
from corral.agent.tasks import TaskSet
from corral.api import DesiredTask

pytestmark = pytest.mark.timeout(20)


def _desired(tmp_path: Path, command: str, **changes: object) -> DesiredTask:
    desired = DesiredTask(
        task_id="j-1/0/0",
        job_id="j-1",
        generation=0,
        node_rank=0,
        command=command,
        launcher="per-node",
        gpus=[],
        env={"MASTER_PORT": "29500"},
        rank_offset=0,
        processes=1,
        checkpoint_dir=str(tmp_path / "ckpt"),
        grace_s=1.0,
    )
    return desired.model_copy(update=changes)


async def _run_to_exit(tmp_path: Path, command: str, **changes: object) -> tuple[TaskSet, asyncio.Event]:
    changed = asyncio.Event()
    tasks = TaskSet("n1", tmp_path / "work", changed, launch.DescendantTracker())
    tasks.reconcile([_desired(tmp_path, command, **changes)])
    [local] = tasks.tasks.values()
    assert local.supervisor is not None
    await asyncio.wait_for(local.supervisor, 10)
    return tasks, changed


def test_a_task_that_ended_before_the_head_heard_it_run_is_reported_running_first(tmp_path):
    async def scenario() -> None:
        tasks, changed = await _run_to_exit(tmp_path, "exit 3")
        first = tasks.reports()
        assert [(r.state, r.exit_code) for r in first] == [("RUNNING", None)]
        assert [(r.state, r.exit_code) for r in tasks.reports(hold_exit=False)] == [("EXITED", 3)]
        changed.clear()
        tasks.acknowledge(first)
        assert changed.is_set(), "the end is due at once"
        second = tasks.reports()
        assert [(r.state, r.exit_code, r.detail) for r in second] == [("EXITED", 3, "exit code 3")]
        tasks.acknowledge(second)
        assert tasks.tasks == {}
        assert not (tmp_path / "work" / "live").exists() or not any((tmp_path / "work" / "live").iterdir())

    asyncio.run(scenario())


def test_a_task_that_could_not_start_is_reported_exited_at_once(tmp_path):
    async def scenario() -> None:
        desired = _desired(tmp_path, "true").model_copy(update={"workdir": None, "command": []})
        changed = asyncio.Event()
        tasks = TaskSet("n1", tmp_path / "work", changed, launch.DescendantTracker())
        tasks.reconcile([desired])
        [local] = tasks.tasks.values()
        assert local.supervisor is not None
        await asyncio.wait_for(local.supervisor, 10)
        [report] = tasks.reports()
        assert (report.state, report.exit_code) == ("EXITED", 127)

    asyncio.run(scenario())


def test_of_several_processes_on_a_node_the_one_that_failed_is_named_by_its_rank(tmp_path):
    async def scenario() -> None:
        command = 'if [ "$RANK" = 5 ]; then exit 9; fi; sleep 5'
        tasks, _ = await _run_to_exit(tmp_path, command, launcher="per-gpu", rank_offset=4, processes=2)
        [report] = tasks.reports(hold_exit=False)
        assert (report.state, report.exit_code) == ("EXITED", 9)
        assert report.detail == "exit code 9 (the process with RANK 5)"

    asyncio.run(scenario())


def test_a_workdir_missing_on_the_node_is_said_in_the_job_log(tmp_path):
    async def scenario() -> None:
        missing = tmp_path / "not-here"
        tasks, _ = await _run_to_exit(tmp_path, "pwd", workdir=str(missing))
        [local] = tasks.tasks.values()
        text = (local.task_dir / "rank-0.log").read_text()
        assert text.splitlines() == [
            f"corral: workdir {missing} does not exist on node n1; running in {local.task_dir}",
            str(local.task_dir),
        ]

    asyncio.run(scenario())
