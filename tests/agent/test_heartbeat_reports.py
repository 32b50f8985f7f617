"""A heartbeat's reports and the desired-state version it says it has applied are taken together."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.agent.agent import Agent, AgentOptions, NodeLost
from corral.agent.gpus.base import Inventory
from corral.api import DesiredState, DesiredTask, HeartbeatRequest
from corral.client.errors import NotFoundError

pytestmark = pytest.mark.timeout(20)


class RecordingHead:
    """The head's side of one heartbeat: keeps the request, then drops the node so the loop ends.
    (The interleaving under test, a desired state landing while a beat is built, cannot be forced
    against a real head.)"""

    def __init__(self) -> None:
        self.sent: list[HeartbeatRequest] = []

    async def heartbeat(self, node: str, request: HeartbeatRequest) -> DesiredState:
        self.sent.append(request)
        raise NotFoundError(f"no node {node!r}")


def _task(tmp_path: Path) -> DesiredTask:
    return DesiredTask(
        task_id="j-7/0/0",
        job_id="j-7",
        generation=0,
        node_rank=0,
        command="sleep 30",
        launcher="per-gpu",
        gpus=[],
        env={},
        rank_offset=0,
        processes=1,
        checkpoint_dir=str(tmp_path / "ckpt"),
        grace_s=0.0,
    )


def test_a_desired_state_applied_while_a_heartbeat_is_built_is_not_claimed_by_it(tmp_path):
    async def main() -> HeartbeatRequest:
        head = RecordingHead()
        agent = Agent(AgentOptions(name="n1", work_dir=tmp_path), head, Inventory(gpus=[], source="none"))  # type: ignore[arg-type]
        agent.version = 3

        async def watch_lands_meanwhile() -> list[object]:
            # The agent's watch applies version 4, with a new task, while the beat waits for its readings.
            agent._apply(DesiredState(version=4, tasks=[_task(tmp_path)], stop_grace_s={}))
            return []

        agent._samples_due = watch_lands_meanwhile  # type: ignore[method-assign]
        agent.changed.set()
        try:
            with pytest.raises(NodeLost):
                await agent._heartbeat()
        finally:
            await agent.tasks.stop_all("test over")
        [sent] = head.sent
        return sent

    sent = asyncio.run(main())
    reported = {r.task_id for r in sent.tasks}
    # Claiming version 4 without its task would make the head take that task as lost.
    assert sent.applied_version == 3 and "j-7/0/0" not in reported


def test_a_stale_desired_state_does_not_start_a_task_again_once_its_end_was_heard(tmp_path):
    async def main() -> None:
        agent = Agent(AgentOptions(name="n1", work_dir=tmp_path), RecordingHead(), Inventory(gpus=[], source="none"))  # type: ignore[arg-type]
        task = _task(tmp_path).model_copy(update={"command": "true"})
        agent._apply(DesiredState(version=1, tasks=[task], stop_grace_s={}))
        for _ in range(500):
            [report] = agent.tasks.reports()
            if report.state == "EXITED" and agent.tasks.tasks[task.task_id].seen_running:
                break
            agent.tasks.acknowledge([report])  # the head hears it run, then end
            await asyncio.sleep(0.01)
        agent.tasks.acknowledge([report])
        assert agent.tasks.tasks == {}
        # A desired state read before the head released the task arrives after the end was heard.
        agent._apply(DesiredState(version=2, tasks=[task], stop_grace_s={}))
        assert agent.tasks.tasks == {}
        started_again = list(tmp_path.glob("tasks/*"))
        assert len(started_again) == 1  # the one directory of the run that ended

    asyncio.run(main())
