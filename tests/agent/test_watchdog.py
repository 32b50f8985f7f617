"""The watchdog of an agent that died: it kills the agent's tasks once the lease has run out, and only them."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from corral.agent import watchdog

pytestmark = pytest.mark.timeout(30)


def _task(node: str, task_dir: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, watchdog.MARKER_ENV: f"{node}:j-1/0/0", watchdog.TASK_DIR_ENV: task_dir}
    return subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)


def _wait_listed(node, work_dir, count):
    deadline = time.monotonic() + 5
    while len(watchdog.task_processes(node, work_dir)) < count and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_dead_agents_tasks_die_when_its_lease_has_run_out(tmp_path):
    node = f"wd-{os.getpid()}"
    mine = _task(node, str(tmp_path / "tasks" / "t0"))
    other_cluster = _task(node, str(tmp_path.parent / f"{tmp_path.name}-other" / "tasks" / "t0"))
    agent = subprocess.Popen(["sleep", "30"])
    try:
        _wait_listed(node, tmp_path, 1)
        watchdog.write_beat(tmp_path, agent.pid, time.monotonic() + 1.0)
        agent.kill()
        agent.wait(5)
        started = time.monotonic()
        why = watchdog.watch(agent.pid, node, tmp_path)
        assert why == "the agent died and its lease ran out: killed 1 task process(es)"
        assert time.monotonic() - started >= 0.5  # not before the lease ended
        assert mine.wait(5) == -9
        assert other_cluster.poll() is None  # the same node name under another work directory
        assert not (tmp_path / watchdog.BEAT_FILE).exists()
    finally:
        for proc in (mine, other_cluster, agent):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def test_the_watchdog_leaves_when_another_agent_takes_over_or_the_agent_shuts_down(tmp_path):
    agent = subprocess.Popen(["sleep", "30"])
    try:
        watchdog.write_beat(tmp_path, agent.pid + 1, time.monotonic() - 1)
        assert watchdog.watch(agent.pid, "n", tmp_path) == f"agent {agent.pid + 1} took over"
        (tmp_path / watchdog.BEAT_FILE).unlink()
        assert watchdog.watch(agent.pid, "n", tmp_path) == "the agent shut down"
    finally:
        agent.kill()
        agent.wait(5)
