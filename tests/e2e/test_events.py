"""`corral events`, listed and followed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _follow_until_done(follower: subprocess.Popen[str], job_id: str) -> list[str]:
    kinds: list[str] = []
    assert follower.stdout is not None
    while "job.succeeded" not in kinds:
        line = follower.stdout.readline()
        assert line, "corral events --follow stopped printing"
        event = json.loads(line)
        if event.get("job_id") == job_id:
            kinds.append(event["kind"])
    return kinds


@pytest.mark.timeout(60)
def test_events_lists_and_follows_a_jobs_life(cluster):
    command = [sys.executable, "-m", "corral", "events", "--follow", "-n", "1", "-o", "json"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=cluster.env()
    ) as follower:
        try:
            job_id = cluster.run("--gpus", "1", command="true")
            cluster.wait_ok(job_id)
            kinds = _follow_until_done(follower, job_id)
        finally:
            follower.kill()
    assert kinds == ["job.submitted", "job.placed", "job.running", "task.released", "job.succeeded"]
    listed = cluster.json("events", "--job", job_id)
    assert [e["kind"] for e in listed] == kinds
    unknown = cluster.cli("events", "--job", "j-nosuchjob")
    assert unknown.returncode == 4, unknown.stderr


@pytest.mark.timeout(60)
def test_top_once_shows_the_nodes_and_a_running_job(cluster):
    job_id = cluster.run("--gpus", "1", command="sleep 20")
    cluster.wait_for(lambda: cluster.show(job_id)["state"] == "RUNNING", 20, "the job to run")
    text = cluster.ok("top", "--once", env=cluster.env(COLUMNS="160"))
    assert "local-1" in text and "local-2" in text
    assert job_id in text and "RUNNING" in text
    piped = subprocess.Popen(
        [sys.executable, "-m", "corral", "top", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cluster.env(COLUMNS="160"),
    )
    try:
        out, _ = piped.communicate(timeout=4)
    except subprocess.TimeoutExpired:
        piped.kill()
        out, _ = piped.communicate()
    assert out.count("local-1") >= 2, out  # frames keep coming when piped, not only at the end
    cluster.ok("cancel", job_id)
