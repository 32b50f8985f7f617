"""``corral logs --follow`` streams a running job's output and returns when the job ends."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
def test_follow_prints_every_line_live_and_exits_with_the_job(cluster):
    lines = [f"line-{i}" for i in range(1, 6)]
    job_id = cluster.run("--gpus", "1", command=" ".join(f"echo {line}; sleep 0.5;" for line in lines) + " echo done")
    follower = subprocess.Popen(
        [sys.executable, "-m", "corral", "logs", job_id, "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cluster.env(),
        cwd=cluster.workspace,
    )
    received: list[tuple[float, str]] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            received.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = follower.wait(timeout=45)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    reader.join(10)
    ended = time.monotonic()
    assert follower.stderr is not None
    stderr = follower.stderr.read()
    follower.stdout.close()
    follower.stderr.close()

    assert code == 0, stderr
    assert [text for _, text in received] == [*lines, "done"]
    assert ended - received[0][0] >= 1.0, "the first line arrived only at the end: output was not followed"
    job = cluster.show(job_id)
    assert job["state"] == "SUCCEEDED", "logs --follow returned before the job ended"
    assert cluster.ok("logs", job_id).splitlines() == [*lines, "done"]
