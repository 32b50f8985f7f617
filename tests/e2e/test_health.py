"""A node whose health command fails gets no work and gives its jobs back; it returns when the check passes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(90)
def test_a_failing_health_command_requeues_the_nodes_jobs(health_cluster):
    cluster, flag = health_cluster
    job_id = cluster.run("--gpus", "1", command="echo attempt $CORRAL_RESTART_COUNT; sleep 60")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 20, "the job to run")
    flag.write_text("broken\n")
    node = cluster.wait_for(
        lambda: (n := cluster.api_nodes()[0])["state"] == "NOT_READY" and n, 20, "the node to turn unhealthy"
    )
    assert "health command" in node["reason"]
    job = cluster.wait_for(lambda: (j := cluster.api_job(job_id))["state"] == "PENDING" and j, 20, "a requeue")
    assert job["restarts"] == 1  # the head-level tests check the requeue's reason word for word
    flag.unlink()
    cluster.wait_for(lambda: cluster.api_nodes()[0]["state"] == "READY", 20, "the node to be healthy again")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 20, "the job to run again")
    cluster.wait_for(lambda: "attempt 1" in cluster.api_logs(job_id).splitlines(), 20, "the second attempt's output")
    cluster.ok("cancel", job_id)
