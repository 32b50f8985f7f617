"""Losing a node: its jobs are requeued elsewhere, and when it returns nothing stale runs there."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = pytest.mark.e2e


def _markers(cluster, prefix: str) -> set[int]:
    return set(cluster.processes_mentioning(f"CORRAL_TASK_MARKER={prefix}"))


@pytest.mark.timeout(120)
def test_a_silent_node_is_declared_lost_and_its_job_runs_elsewhere(lossy_cluster):
    cluster, daemons = lossy_cluster
    job_id = cluster.run("--gpus", "1", "--max-restarts", "1", command="echo attempt $CORRAL_RESTART_COUNT; sleep 60")
    first = cluster.wait_for(
        lambda: (job := cluster.api_job(job_id))["state"] == "RUNNING" and job, 30, "the job to run"
    )
    lost_node = first["allocation"][0]["node"]
    other = "n2" if lost_node == "n1" else "n1"
    first_attempt = f"{lost_node}:{job_id}/0/"
    assert _markers(cluster, first_attempt), "the first attempt's processes should be running"

    agent = daemons[lost_node]
    os.kill(agent.pid, signal.SIGSTOP)  # the node goes silent; its task keeps running for now
    try:
        cluster.wait_for(
            lambda: {n["name"]: n["state"] for n in cluster.api_nodes()}[lost_node] == "NOT_READY",
            20,
            "the silent node to be declared NOT_READY",
        )
        second = cluster.wait_for(
            lambda: (job := cluster.api_job(job_id))["state"] == "RUNNING" and job["restarts"] == 1 and job,
            30,
            "the job to run again on the other node",
        )
        assert second["allocation"][0]["node"] == other
    finally:
        os.kill(agent.pid, signal.SIGCONT)

    # Back from its silence, the agent is told the node was lost: it stops the stale attempt and registers again.
    cluster.wait_for(lambda: not _markers(cluster, first_attempt), 20, "the stale attempt to be stopped")
    cluster.wait_for(
        lambda: {n["name"]: n["state"] for n in cluster.api_nodes()}[lost_node] == "READY",
        20,
        "the node to be READY again",
    )
    job = cluster.show(job_id)
    assert job["state"] == "RUNNING"
    assert job["allocation"][0]["node"] == other
    assert "attempt 1" in cluster.ok("logs", job_id).splitlines()
    nodes = {n["name"]: n for n in cluster.json("nodes")}
    assert all(g["allocated_to"] is None for g in nodes[lost_node]["gpus"])
    cluster.ok("cancel", job_id)


@pytest.mark.timeout(120)
def test_an_agent_cut_off_from_the_head_stops_its_tasks_after_its_lease(lossy_cluster):
    cluster, daemons = lossy_cluster
    job_id = cluster.run("--gpus", "1", "--max-restarts", "1", command="sleep 60")
    job = cluster.wait_for(lambda: (j := cluster.api_job(job_id))["state"] == "RUNNING" and j, 30, "the job to run")
    node = job["allocation"][0]["node"]
    attempt = f"{node}:{job_id}/0/"
    head = daemons["head"]
    os.kill(head.pid, signal.SIGSTOP)  # the agent can no longer reach the head
    stopped_at = time.monotonic()
    try:
        cluster.wait_for(lambda: not _markers(cluster, attempt), 20, "the agent to fence its task")
        assert time.monotonic() - stopped_at >= 2.0  # not before its 4 s lease less 1 s (and the last beat's age)
    finally:
        os.kill(head.pid, signal.SIGCONT)
    again = cluster.wait_for(
        lambda: (j := cluster.api_job(job_id))["state"] == "RUNNING" and j["restarts"] == 1 and j,
        30,
        "the job to run again",
    )
    assert again["allocation"]
    cluster.ok("cancel", job_id)


@pytest.mark.timeout(120)
def test_an_agent_that_dies_and_stays_away_has_its_tasks_killed_when_its_lease_ends(lossy_cluster):
    cluster, daemons = lossy_cluster
    job_id = cluster.run("--gpus", "1", "--max-restarts", "1", command="sleep 60")
    first = cluster.wait_for(
        lambda: (job := cluster.api_job(job_id))["state"] == "RUNNING" and job, 30, "the job to run"
    )
    lost_node = first["allocation"][0]["node"]
    first_attempt = f"{lost_node}:{job_id}/0/"
    assert _markers(cluster, first_attempt)

    daemons[lost_node].kill()  # the agent process alone: its task keeps running, and no agent comes back
    daemons[lost_node].wait(10)
    died = time.monotonic()
    cluster.wait_for(lambda: not _markers(cluster, first_attempt), 20, "the watchdog to kill the orphaned task")
    assert time.monotonic() - died <= 4 + 3, "killed once the 4 s lease ran out, not much later"
    second = cluster.wait_for(
        lambda: (job := cluster.api_job(job_id))["state"] == "RUNNING" and job["restarts"] == 1 and job,
        40,
        "the next attempt to run on the other node",
    )
    assert second["allocation"][0]["node"] != lost_node
    assert not _markers(cluster, first_attempt), "two attempts must never run at once"
    cluster.ok("cancel", job_id)


@pytest.mark.timeout(120)
def test_a_gang_that_fails_for_good_with_a_lost_node_ends_failed_only_once_its_tasks_there_are_stopped(lossy_cluster):
    cluster, daemons = lossy_cluster
    job_id = cluster.run("--nodes", "2", "--gpus", "1", command="sleep 60")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the gang to run")
    lost_attempt = f"n2:{job_id}/0/"
    assert _markers(cluster, lost_attempt)

    daemons["n2"].kill()  # the agent alone: its task runs on until its watchdog fences it at the lease's end
    daemons["n2"].wait(10)
    while _markers(cluster, lost_attempt):
        job = cluster.api_job(job_id)
        assert job["state"] != "FAILED", f"FAILED while its processes on the lost node still run: {job['reason']}"
        time.sleep(0.05)
    cluster.wait(job_id, timeout=30)
    job = cluster.show(job_id)
    assert job["state"] == "FAILED" and "node rank 1 lost" in job["reason"], job
    assert "it ends FAILED" not in job["reason"], job
