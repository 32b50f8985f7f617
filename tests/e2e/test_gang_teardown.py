"""Gang teardown with several processes per node: a failing rank stops the other nodes at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(90)
def test_a_rank_failing_beside_one_that_takes_its_grace_period_stops_the_other_nodes_at_once(cluster):
    """Rank 2 fails; rank 3, on its node, ignores SIGTERM for the whole grace period. The ranks of the
    other node are stopped (and the job's reason says why) as soon as rank 2 fails, not a grace period
    later, once its node's task is over; the job ends FAILED with rank 2's exit code."""
    marks = cluster.workspace / "gang-teardown"
    marks.mkdir()
    command = (
        f'if [ "$RANK" = 2 ]; then sleep 2; date +%s.%N > {marks}/failed; exit 5; fi; '
        f'if [ "$RANK" = 3 ]; then trap "" TERM; else trap "date +%s.%N > {marks}/term-$RANK; exit 0" TERM; fi; '
        "sleep 60 & wait"
    )
    job_id = cluster.run(
        "--nodes", "2", "--gpus", "2", "--launcher", "per-gpu", "--grace-period", "8s", command=command
    )  # fmt: skip
    failed_at = stamp(cluster, marks / "failed", 60, "rank 2 to fail")
    job = cluster.wait_for(
        lambda: (j := cluster.api_job(job_id))["exit_code"] == 5 and j, 20, "the head to hear of the failure", 0.1
    )
    assert time.time() - failed_at < 5.0, "the head heard of the failure only once the failing node's task ended"
    assert "the process with RANK 2" in job["reason"] and "it ends FAILED once" in job["reason"], job
    for rank in (0, 1):
        term = marks / f"term-{rank}"
        stopped_at = stamp(cluster, term, 20, f"rank {rank} to get SIGTERM")
        assert stopped_at - failed_at < 5.0, f"rank {rank} was stopped a grace period late"
    cluster.wait(job_id, timeout=40)
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"], job["restarts"]) == ("FAILED", 5, 0), job
    assert "exit code 5 (the process with RANK 2)" in job["reason"] and "it ends FAILED" not in job["reason"], job
    tasks = {t["node_rank"]: t for t in job["tasks"]}
    assert tasks[1]["exit_code"] == 5 and "RANK 2" in tasks[1]["detail"], tasks


def stamp(cluster, path: Path, timeout: float, what: str) -> float:
    """The time a rank wrote to ``path``, once it has written it: the shell creates the file before ``date``
    writes to it, so the file may be there and still empty."""
    return float(cluster.wait_for(lambda: path.exists() and path.read_text().strip(), timeout, what, 0.05))
