"""A heartbeat ships the logs of the tasks it reports ended, and only theirs, for a bounded time: the ends
of those it had no time for wait for a later beat, and a shipment of another task's log in progress never
holds it up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.agent import logship
from corral.agent.agent import Agent, AgentOptions, NodeLost
from corral.agent.gpus.base import Inventory
from corral.agent.logship import LogShipper
from corral.api import DesiredState, DesiredTask, HeartbeatRequest
from corral.client.errors import NotFoundError

pytestmark = pytest.mark.timeout(30)


class RecordingHead:
    """The head's side: keeps every shipped chunk and the first heartbeat, then drops the node so the loop
    ends. (A shipment held in flight, the interleaving under test, cannot be forced against a real head.)"""

    def __init__(self) -> None:
        self.beats: list[HeartbeatRequest] = []
        self.shipped: list[str] = []
        self.hold: dict[str, asyncio.Event] = {}  # job → released when its shipment may answer

    async def ship_logs(self, node: str, job_id: str, generation: int, rank: int, offset: int, data: bytes) -> int:
        if job_id in self.hold:
            await self.hold[job_id].wait()
        self.shipped.append(job_id)
        return offset + len(data)

    async def heartbeat(self, node: str, request: HeartbeatRequest) -> DesiredState:
        self.beats.append(request)
        raise NotFoundError(f"no node {node!r}")


def _task(tmp_path: Path, job: str, command: str) -> DesiredTask:
    return DesiredTask(
        task_id=f"{job}/0/0",
        job_id=job,
        generation=0,
        node_rank=0,
        command=command,
        launcher="per-node",
        gpus=[],
        env={},
        rank_offset=0,
        processes=1,
        checkpoint_dir=str(tmp_path / "ckpt" / job),
        grace_s=0.0,
    )


async def _ended(agent: Agent, jobs: list[str]) -> None:
    for _ in range(1000):
        if all(agent.tasks.tasks[f"{j}/0/0"].state == "EXITED" for j in jobs):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the tasks did not end")


async def _one_beat(agent: Agent) -> None:
    agent.changed.set()
    with pytest.raises(NodeLost):
        await agent._heartbeat()


def _states(beat: HeartbeatRequest) -> dict[str, str]:
    return {r.task_id.split("/")[0]: r.state for r in beat.tasks}


def test_a_heartbeat_does_not_wait_for_the_log_of_a_task_still_running(tmp_path):
    async def main() -> tuple[RecordingHead, HeartbeatRequest]:
        head = RecordingHead()
        agent = Agent(AgentOptions(name="n1", work_dir=tmp_path), head, Inventory(gpus=[], source="none"))  # type: ignore[arg-type]
        tasks = [_task(tmp_path, "j-long", "echo busy; sleep 30"), _task(tmp_path, "j-done", "echo done")]
        agent._apply(DesiredState(version=1, tasks=tasks, stop_grace_s={}))
        await _ended(agent, ["j-done"])
        for local in agent.tasks.tasks.values():
            local.seen_running = True  # the head heard both run
        while not (tmp_path / "tasks").exists() or "busy" not in _log(agent, "j-long").read_text():
            await asyncio.sleep(0.01)
        # The periodic pass is shipping the running task's log, and the head does not answer it yet.
        head.hold["j-long"] = asyncio.Event()
        passing = asyncio.create_task(agent._ship_logs())
        await asyncio.sleep(0.05)
        try:
            await asyncio.wait_for(_one_beat(agent), 5)
        finally:
            head.hold["j-long"].set()
            await passing
            await agent.tasks.stop_all("test over")
        return head, head.beats[0]

    head, beat = asyncio.run(main())
    assert _states(beat) == {"j-long": "RUNNING", "j-done": "EXITED"}
    assert head.shipped.index("j-done") < head.shipped.index("j-long")  # its last lines went before its end


def test_ends_whose_logs_had_no_time_wait_for_a_later_beat(tmp_path, monkeypatch):
    monkeypatch.setattr(logship, "EXIT_LOGS_BUDGET_S", 0.0)
    monkeypatch.setattr("corral.agent.agent.EXIT_LOGS_BUDGET_S", 0.0)

    async def main() -> tuple[RecordingHead, list[HeartbeatRequest]]:
        head = RecordingHead()
        agent = Agent(AgentOptions(name="n1", work_dir=tmp_path), head, Inventory(gpus=[], source="none"))  # type: ignore[arg-type]
        agent._apply(DesiredState(version=1, tasks=[_task(tmp_path, "j-1", "echo out")], stop_grace_s={}))
        await _ended(agent, ["j-1"])
        agent.tasks.tasks["j-1/0/0"].seen_running = True
        await _one_beat(agent)  # no time to ship: the end is held back
        await agent._ship_logs()  # the periodic pass ships it
        await _one_beat(agent)
        return head, head.beats

    head, beats = asyncio.run(main())
    assert [_states(b) for b in beats] == [{"j-1": "RUNNING"}, {"j-1": "EXITED"}]
    assert beats[0].tasks[0].exit_code is None and beats[1].tasks[0].exit_code == 0
    assert head.shipped == ["j-1"]


def _log(agent: Agent, job: str) -> Path:
    return agent.tasks.tasks[f"{job}/0/0"].shippers[0].path


def test_one_log_is_shipped_by_one_caller_at_a_time(tmp_path):
    log_file = tmp_path / "rank-0.log"
    log_file.write_text("line\n")

    async def main() -> RecordingHead:
        head = RecordingHead()
        shipper = LogShipper(log_file, "j-1", 0, 0)
        head.hold["j-1"] = asyncio.Event()
        first = asyncio.create_task(shipper.ship(head, "n1"))  # type: ignore[arg-type]
        second = asyncio.create_task(shipper.ship(head, "n1"))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        head.hold["j-1"].set()
        assert await first and await second
        return head

    assert asyncio.run(main()).shipped == ["j-1"]  # the second found it shipped: no chunk twice
