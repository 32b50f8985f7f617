"""Cancelling ends a job's whole process tree, even processes that ignore SIGTERM or left the session.

Runs on ``quick_cluster``: a head with a 2 s grace period and one node with one GPU, so the job
that follows must reuse the cancelled job's GPU.
"""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.e2e

GRACE_S = 2.0

SHELL_TREE = (
    'trap "" TERM; echo $$ >> {pids}; '
    '(trap "" TERM; sleep 300) & echo $! >> {pids}; '
    "setsid sleep 301 & echo $! >> {pids}; "
    "echo started; wait"
)

PYTHON_TREE = textwrap.dedent(
    """
    import os, signal, sys, time

    def record():
        with open(sys.argv[1], "a") as out:
            out.write(f"{os.getpid()}\\n")

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by both children
    record()
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()  # the grandchild leaves the job's session and process group
            record()
            time.sleep(300)
            os._exit(0)
        record()
        time.sleep(300)
        os._exit(0)
    print("started", flush=True)
    os.wait()
    """
)


def _command(kind: str, workspace, pids) -> str:
    if kind == "shell":
        return SHELL_TREE.format(pids=pids)
    script = workspace / "tree.py"
    script.write_text(PYTHON_TREE)
    return f"{sys.executable} {script} {pids}"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["shell", "python"])
def test_cancel_kills_a_tree_that_ignores_sigterm_and_frees_the_gpu(quick_cluster, kind):
    cluster = quick_cluster
    pids_file = cluster.workspace / f"pids-{kind}.txt"
    job_id = cluster.run("--gpus", "1", command=_command(kind, cluster.workspace, pids_file))

    def recorded() -> list[int]:
        text = pids_file.read_text() if pids_file.exists() else ""
        return [int(p) for p in text.split()] if text.count("\n") >= 3 else []

    pids = cluster.wait_for(recorded, 30, "the job to record its 3 pids")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the job to run")
    keys = {key for pid in pids if (key := cluster.process_key(pid)) is not None}
    assert len(keys) == 3, f"recorded processes {pids} are not all alive"
    tree = cluster.processes_mentioning(f"CORRAL_JOB_ID={job_id}\0")
    assert set(pids) <= set(tree), (pids, tree)
    keys |= {key for pid in tree if (key := cluster.process_key(pid)) is not None}

    started = time.monotonic()
    cancelled = cluster.cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"{job_id}: cancelled" in cancelled.stdout
    assert any(cluster.alive(key) for key in keys), "every process died at once: SIGTERM was not ignored"
    job = cluster.show(job_id)
    assert job["state"] == "CANCELLED"
    assert job["finished_at"] is not None

    cluster.wait_for(
        lambda: not [key for key in keys if cluster.alive(key)],
        GRACE_S + 8,
        f"processes of {job_id} to be killed",
        interval_s=0.05,
    )
    took = time.monotonic() - started
    assert took >= GRACE_S, f"killed {took:.2f}s after the cancel: the grace period was cut short"
    assert took < GRACE_S + 8

    def gpu_free() -> bool:
        return all(g["allocated_to"] is None for n in cluster.api_nodes() for g in n["gpus"])

    cluster.wait_for(gpu_free, 15, "the GPU to be released", interval_s=0.3)
    assert cluster.show(job_id)["state"] == "CANCELLED"

    reuse = cluster.run("--gpus", "1", command="echo reused")
    cluster.wait_ok(reuse)
    assert [(a["node"], a["gpus"]) for a in cluster.show(reuse)["allocation"]] == [("solo", [0])]
    assert cluster.ok("logs", reuse) == "reused\n"
