"""Preemption on a real cluster: SIGTERM, the job's grace period to checkpoint, SIGKILL, requeue, resume.

Runs on ``quick_cluster``: one node with one GPU, so a higher-priority job can start only by
preempting the job that holds it.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e

TRAINER = textwrap.dedent(
    """
    import os, pathlib, signal, subprocess, sys, time

    ckpt = pathlib.Path(os.environ["CORRAL_CHECKPOINT_DIR"])
    ckpt.mkdir(parents=True, exist_ok=True)
    attempt = int(os.environ["CORRAL_RESTART_COUNT"])

    def save(signum, frame):
        (ckpt / "state").write_text(f"saved by attempt {attempt} on signal {signum}")
        (ckpt / ".corral-checkpoint").touch()
        print("checkpointed in the grace period", flush=True)
        sys.exit(143)

    signal.signal(signal.SIGTERM, save)
    if attempt > 0:
        print("resumed from:", (ckpt / "state").read_text(), flush=True)
        sys.exit(0)
    subprocess.run([sys.executable, "-m", "corral", "checkpoint-done"], check=True)
    print("training", flush=True)
    time.sleep(120)
    """
)


def _trainer(cluster) -> str:
    script = cluster.workspace / "trainer.py"
    script.write_text(TRAINER)
    return f"{sys.executable} {script}"


def _running_and_logging(cluster, job_id: str, line: str) -> bool:
    return cluster.api_job(job_id)["state"] == "RUNNING" and line in cluster.api_logs(job_id)


@pytest.mark.timeout(120)
def test_a_higher_priority_job_preempts_and_the_victim_resumes_from_its_checkpoint(quick_cluster):
    cluster = quick_cluster
    low = cluster.run("--gpus", "1", "--preemptible", "--grace-period", "10s", command=_trainer(cluster))
    cluster.wait_for(lambda: _running_and_logging(cluster, low, "training"), 60, "the trainer to start")
    assert cluster.show(low)["last_checkpoint_at"] is not None  # `corral checkpoint-done` from inside the job

    high = cluster.run("--gpus", "1", "--priority", "10", command="echo urgent work done")
    cluster.wait_ok(high, timeout=60)
    cluster.wait_ok(low, timeout=60)

    job = cluster.show(low)
    assert job["restarts"] == 1 and job["preemptions"] == 1
    assert job["max_restarts"] == 0  # preemption did not need a restart budget
    log = cluster.ok("logs", low)
    assert "resumed from: saved by attempt 0 on signal 15" in log
    events = cluster.json("events", "--job", low)
    assert any(e["kind"] == "job.preempted" and high in e["message"] for e in events)


@pytest.mark.timeout(120)
def test_an_admin_preempts_a_running_job_with_corral_preempt(quick_cluster):
    cluster = quick_cluster
    job_id = cluster.run("--gpus", "1", "--grace-period", "10s", command=_trainer(cluster))
    cluster.wait_for(lambda: _running_and_logging(cluster, job_id, "training"), 60, "the trainer to start")

    [preempted] = cluster.json("preempt", job_id)
    assert preempted["state"] == "PENDING"
    assert preempted["reason"].startswith("preempted by admin")
    cluster.wait_ok(job_id, timeout=60)
    assert "resumed from: saved by attempt 0 on signal 15" in cluster.ok("logs", job_id)

    done = cluster.cli("preempt", job_id)
    assert done.returncode == 1
    assert "not RUNNING" in done.stderr
