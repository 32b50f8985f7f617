"""Distributed training with real PyTorch (gloo on CPU) over two agents: examples/ddp_train.py.

The job checkpoints into CORRAL_CHECKPOINT_DIR and resumes from it; these tests take a node away,
fail a rank, run torchrun per node, and let a time limit stop it.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
pytest.importorskip("torch", reason="PyTorch is not installed: pip install -e '.[dev]' installs torch==2.13.0")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
TRAIN = f"{sys.executable} {EXAMPLE} --timeout 20"
DDP_2x2 = ("--nodes", "2", "--gpus", "2", "--launcher", "per-gpu")


@pytest.fixture
def ddp(ddp_cluster):
    yield ddp_cluster
    ddp_cluster.cluster.settle()


def _running(cluster, job_id: str) -> dict:
    return cluster.wait_for(lambda: (j := cluster.api_job(job_id))["state"] == "RUNNING" and j, 60, f"{job_id} to run")


def _rank_pids(job_id: str) -> dict[int, set[int]]:
    """Live processes of a job by rank (a rank's process tree shares its RANK variable)."""
    found: dict[int, set[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"CORRAL_JOB_ID={job_id}".encode() in environ and state not in "ZX":
            rank = next(int(e[5:]) for e in environ if e.startswith(b"RANK="))
            found.setdefault(rank, set()).add(int(entry))
    return found


def _digests(checkpoint_dir: Path, ranks: int) -> set[str]:
    return {(checkpoint_dir / f"digest-rank-{rank}").read_text().strip() for rank in range(ranks)}


@pytest.mark.timeout(120)
def test_a_ddp_job_survives_losing_a_node_and_resumes_from_its_checkpoint(ddp):
    cluster = ddp.cluster
    job_id = cluster.run(
        *DDP_2x2, "--max-restarts", "2", command=f"{TRAIN} --steps 60 --checkpoint-every 10 --step-seconds 0.05"
    )
    checkpoints = Path(cluster.show(job_id)["checkpoint_dir"])
    cluster.wait_for(lambda: (checkpoints / ".corral-checkpoint").exists(), 60, "the first checkpoint", 0.05)
    job = cluster.show(job_id)
    assert job["state"] == "RUNNING" and job["restarts"] == 0
    victim = next(t["node"] for t in job["tasks"] if t["node_rank"] == 1)

    ddp.kill_node(victim)  # the agent and every process under it, at once
    ddp.restart_agent(victim)

    cluster.wait_ok(job_id, timeout=90)
    job = cluster.show(job_id)
    assert job["restarts"] == 1
    log = cluster.ok("logs", job_id)
    resumed = re.search(r"resumed from step (\d+)", log)
    assert resumed and int(resumed.group(1)) > 0, log
    assert "CORRAL_RESTART_COUNT=1" in log
    assert len(_digests(checkpoints, 4)) == 1, "every rank should end with the same parameters"


@pytest.mark.timeout(90)
def test_a_failing_rank_takes_the_whole_gang_down_within_5s(ddp):
    cluster = ddp.cluster
    job_id = cluster.run(*DDP_2x2, command=f"{TRAIN} --steps 100000 --step-seconds 0.05 --fail-rank 1 --fail-step 20")
    cluster.wait_for(lambda: len(_rank_pids(job_id)) == 4, 60, "four ranks")
    rank_1_gone = None
    while True:
        ranks = _rank_pids(job_id)
        now = time.monotonic()
        if rank_1_gone is None and 1 not in ranks:
            rank_1_gone = now
        if not ranks:
            break
        assert rank_1_gone is None or now - rank_1_gone < 5.0, f"ranks still alive: {ranks}"
        assert cluster.api_job(job_id)["state"] in ("RUNNING", "PENDING", "FAILED")
        time.sleep(0.05)
    assert rank_1_gone is not None
    cluster.wait(job_id, timeout=30)
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"], job["restarts"]) == ("FAILED", 3, 0), job
    assert "exit code 3" in job["reason"]
    assert "failing on purpose at step 20" in cluster.ok("logs", job_id, "--rank", "1")


@pytest.mark.timeout(90)
def test_torchrun_per_node_forms_one_job_across_two_nodes(ddp):
    cluster = ddp.cluster
    torchrun = (
        f"{sys.executable} -m torch.distributed.run --nnodes $NNODES --node-rank $NODE_RANK --nproc-per-node 1"
        " --master-addr $MASTER_ADDR --master-port $MASTER_PORT"
    )
    job_id = cluster.run(
        "--nodes", "2", "--gpus", "1", "--launcher", "per-node", command=f"{torchrun} {EXAMPLE} --steps 20"
    )
    cluster.wait_ok(job_id, timeout=80)
    checkpoints = Path(cluster.show(job_id)["checkpoint_dir"])
    assert len(_digests(checkpoints, 2)) == 1
    assert "[rank 1] done: 20 steps" in cluster.ok("logs", job_id, "--rank", "1")


@pytest.mark.timeout(90)
def test_a_job_past_its_time_limit_checkpoints_in_its_grace_period_and_ends_timeout(ddp):
    cluster = ddp.cluster
    job_id = cluster.run(
        "--gpus", "1", "--launcher", "per-gpu", "--time-limit", "12s",
        command=f"{TRAIN} --steps 100000 --checkpoint-every 100000 --step-seconds 0.05",
    )  # fmt: skip
    checkpoints = Path(cluster.show(job_id)["checkpoint_dir"])
    cluster.wait(job_id, timeout=60)
    job = cluster.show(job_id)
    assert job["state"] == "TIMEOUT", job
    log = cluster.ok("logs", job_id)
    stopped = re.search(r"SIGTERM: stopping at step (\d+)", log)
    assert stopped and f"checkpoint saved at step {stopped.group(1)}" in log, log
    assert (checkpoints / "model.pt").exists() and (checkpoints / ".corral-checkpoint").exists()
