"""The watchdog of an agent that died: it kills the agent's tasks once the lease has run out, and only them."""

from __future__ import annotations

import os
import signal
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
        lease_end = time.monotonic() + 1.5
        watchdog.write_beat(tmp_path, agent.pid, lease_end)
        agent.kill()
        agent.wait(5)
        why = watchdog.watch(agent.pid, node, tmp_path)
        assert why == "the agent died and its lease ran out: killed 1 task process(es)"
        killed_at = time.monotonic()
        assert lease_end - 1.0 <= killed_at <= lease_end  # just before the lease ends: not sooner, not after
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


def test_a_hung_agents_tasks_die_before_its_lease_ends_and_the_watchdog_stays(tmp_path):
    """An agent that lives but neither renews its lease nor fences (stopped with SIGSTOP, stuck in the
    kernel): its tasks must be dead when the lease ends, for the head starts the next attempts then."""
    node = f"wd-hung-{os.getpid()}"
    task = _task(node, str(tmp_path / "tasks" / "t0"))
    agent = subprocess.Popen(["sleep", "30"])
    guard = None
    try:
        _wait_listed(node, tmp_path, 1)
        lease_end = time.monotonic() + 2.0
        guard = watchdog.start(agent.pid, node, tmp_path, lease_end)
        os.kill(agent.pid, signal.SIGSTOP)
        assert task.wait(5) == -9
        assert time.monotonic() <= lease_end + 0.1
        assert guard.poll() is None  # still watching: the agent may come back
        assert (tmp_path / watchdog.BEAT_FILE).exists()
    finally:
        if guard is not None:
            watchdog.stop(guard, tmp_path)
        for proc in (task, agent):
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
