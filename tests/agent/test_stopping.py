"""An agent stops by cancelling its loops, and waits for every one of them to end: a loop that runs on
after its cancel keeps the agent from ever exiting (it is SIGKILLed, and its watchdog stays behind)."""

from __future__ import annotations

import asyncio

import pytest

from corral.agent.agent import Agent, AgentOptions
from corral.agent.gpus.base import Inventory
from corral.api import DesiredState, HeartbeatRequest

pytestmark = pytest.mark.timeout(20)


class AnsweringHead:
    """A head that answers every heartbeat with an empty desired state."""

    def __init__(self) -> None:
        self.beats = 0

    async def heartbeat(self, node: str, request: HeartbeatRequest) -> DesiredState:
        self.beats += 1
        return DesiredState(version=0, tasks=[], stop_grace_s={})


def test_a_stop_that_comes_as_a_change_wakes_the_heartbeat_still_ends_it(tmp_path):
    async def main() -> None:
        options = AgentOptions(name="n1", work_dir=tmp_path, heartbeat_interval_s=30.0)
        agent = Agent(options, AnsweringHead(), Inventory(gpus=[], source="none"))  # type: ignore[arg-type]
        beating = asyncio.create_task(agent._heartbeat())
        for _ in range(5):
            await asyncio.sleep(0)  # the loop waits for a change (or its 30 s interval)
        # A task changed state just as the agent is told to stop: both reach the loop in the same turn.
        agent.changed.set()
        beating.cancel()
        done, _ = await asyncio.wait([beating], timeout=5)
        if not done:
            beating.cancel()
        assert done == {beating} and beating.cancelled(), "the heartbeat loop ran on after it was cancelled"

    asyncio.run(main())
