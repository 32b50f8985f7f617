"""Waiting for a local cluster `corral up` starts: the head answering, every agent's node up."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from corral.cli.procs import alive, log_since
from corral.client.calls import HeadApi
from corral.client.config import corral_home
from corral.client.errors import CorralError
from corral.client.light import LightTransport

START_TIMEOUT_S = 30.0


def healthy(url: str) -> bool:
    try:
        HeadApi(LightTransport(url, timeout_s=2.0)).health()
    except CorralError:
        return False
    return True


def wait_head(url: str, pid: int, log_path: Path, log_start: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if healthy(url):
            return
        if not alive(pid):
            tail = log_since(log_path, log_start)
            raise CorralError(f"the head exited during start-up; its log ({log_path}) ends with:\n{tail}")
        time.sleep(0.05)
    raise CorralError(f"the head did not answer at {url} within {START_TIMEOUT_S:.0f}s; see {log_path}")


def wait_nodes(api: HeadApi, names: list[str], fresh: dict[str, Started], since: datetime) -> None:
    """Wait until every agent is up: its node READY, or DRAINED (an admin's choice, kept across restarts);
    the ones in ``fresh`` (just started) must have registered after ``since``, and be the agent of their
    work directory: one that exits (another agent holds its node) is an error, with its log."""
    deadline = time.monotonic() + START_TIMEOUT_S
    states: dict[str, str] = {}
    up: set[str] = set()
    while time.monotonic() < deadline:
        for name, started in fresh.items():
            if not alive(started.pid):
                tail = log_since(started.log_path, started.log_start)
                raise CorralError(
                    f"agent {name} exited during start-up; its log ({started.log_path}) ends with:\n{tail}"
                )
        holding = all(beat_pid(started.work_dir) == started.pid for started in fresh.values())
        nodes = api.nodes()
        states = {n["name"]: n["state"] for n in nodes}
        up = {
            n["name"]
            for n in nodes
            if n["state"] in ("READY", "DRAINED")
            and (n["name"] not in fresh or _heard_since(n["last_heartbeat"], since))
        }
        if set(names) <= up and holding:
            return
        time.sleep(0.05)
    missing = [name for name in names if name not in up]
    detail = ", ".join(f"{name} ({states.get(name, 'not registered').lower().replace('_', ' ')})" for name in missing)
    raise CorralError(
        f"agents did not come up within {START_TIMEOUT_S:.0f}s: {detail}; see the logs under {corral_home() / 'logs'}"
    )


@dataclass(frozen=True)
class Started:
    """An agent ``up`` just started."""

    pid: int
    work_dir: Path
    log_path: Path
    log_start: int


def beat_pid(work_dir: Path) -> int | None:
    """The pid of the agent that holds the work directory (its watchdog's beat file names it)."""
    from corral.agent.watchdog import read_beat

    beat = read_beat(work_dir)
    return None if beat is None else beat[0]


def _heard_since(stamp: str | None, since: datetime) -> bool:
    return stamp is not None and datetime.fromisoformat(stamp.replace("Z", "+00:00")) >= since
