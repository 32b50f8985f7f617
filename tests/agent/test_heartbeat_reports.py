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
