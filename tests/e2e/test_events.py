"""`corral events`, listed and followed."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

pytestmark = pytest.mark.e2e


def _read_until(process: subprocess.Popen[bytes], enough: Callable[[str], bool], timeout_s: float) -> str:
    """What the process has written to its stdout by the time it is ``enough``, or when ``timeout_s`` have
    passed, or when it closes its stdout."""
    assert process.stdout is not None
    out, deadline = b"", time.monotonic() + timeout_s
    while not enough(out.decode(errors="replace")) and (left := deadline - time.monotonic()) > 0:
        if select.select([process.stdout], [], [], left)[0]:
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


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
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 20, "the job to run")
    text = cluster.ok("top", "--once", env=cluster.env(COLUMNS="160"))
    assert "local-1" in text and "local-2" in text
    assert job_id in text and "RUNNING" in text
    piped = subprocess.Popen(
        [sys.executable, "-m", "corral", "top", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=cluster.env(COLUMNS="160"),
    )
    try:
        out = _read_until(piped, lambda text: text.count("local-1") >= 2, 10.0)
    finally:
        piped.kill()
        piped.communicate()
    assert out.count("local-1") >= 2, out  # frames keep coming when piped, not only at the end
    cluster.ok("cancel", job_id)
