"""`corral up` waits for the agents it started: each must hold its work directory and have its node up."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from corral.agent import watchdog
from corral.cli.localwait import Started, wait_nodes
from corral.client.errors import CorralError


class Nodes:
    """The head's node list: the node READY, heard from just now (as another agent of that name keeps it)."""

    def nodes(self) -> list[dict[str, Any]]:
        return [{"name": "local-1", "state": "READY", "last_heartbeat": datetime.now(UTC).isoformat()}]


def test_an_agent_that_exits_because_another_holds_its_node_is_reported_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "agent-local-1.log"
    with log.open("ab") as out:
        agent = subprocess.Popen(["sh", "-c", "echo 'error: another agent already runs here'; exit 2"], stdout=out)
    agent.wait(5)
    watchdog.write_beat(tmp_path, agent.pid + 1, 0.0)  # the other agent's beat
    started = {"local-1": Started(agent.pid, tmp_path, log, 0)}
    since = datetime.now(UTC) - timedelta(seconds=5)
    with pytest.raises(CorralError, match="agent local-1 exited during start-up") as info:
        wait_nodes(Nodes(), ["local-1"], started, since)  # type: ignore[arg-type]
    assert "another agent already runs here" in str(info.value)


def test_an_agent_holding_its_work_directory_with_its_node_up_is_up(tmp_path: Path) -> None:
    agent = subprocess.Popen(["sleep", "30"])
    try:
        watchdog.write_beat(tmp_path, agent.pid, 0.0)
        started = {"local-1": Started(agent.pid, tmp_path, tmp_path / "agent.log", 0)}
        wait_nodes(Nodes(), ["local-1"], started, datetime.now(UTC) - timedelta(seconds=5))  # type: ignore[arg-type]
    finally:
        agent.kill()
        agent.wait(5)
