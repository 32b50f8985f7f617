"""Followers (``logs --follow``, ``events --follow``) whose head stops exit 3 with a message, not a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from corral.testing.procs import wait_for

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(90)
def test_followers_exit_3_when_the_head_stops(stoppable_cluster):
    cluster, daemons = stoppable_cluster
    job_id = cluster.run("--gpus", "1", command="for i in $(seq 1 60); do echo tick$i; sleep 0.5; done")
    wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the job to start")

    def follow(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "corral", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=cluster.env(),
            cwd=cluster.workspace,
        )

    followers = {"logs": follow("logs", job_id, "--follow"), "events": follow("events", "--follow", "-o", "json")}
    wait_for(lambda: "tick3" in cluster.api_logs(job_id), 30, "some output")
    daemons["head"].send_signal(signal.SIGTERM)
    daemons["head"].wait(30)
    for name, follower in followers.items():
        try:
            out, err = follower.communicate(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        assert follower.returncode == 3, f"{name}: exit {follower.returncode}\n{err}"
        assert "Traceback" not in err, f"{name}: {err}"
        assert "corral up" in err or "run the command again" in err, f"{name}: {err}"
        if name == "logs":
            assert out.startswith("tick1\n"), out
