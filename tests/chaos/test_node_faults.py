"""Machines fail: a node dies with everything on it and stays down; a node is cut off from the
network (its agent and tasks live in their own network namespace). Jobs move to the nodes that are
left, and no job ever runs in two places at once."""

from __future__ import annotations

import collections
import contextlib
import time
from pathlib import Path

import pytest

from corral.testing import netns
from corral.testing.audit import all_events, double_holds, overlapping, still_held
from corral.testing.procs import processes_mentioning, wait_for

pytestmark = pytest.mark.e2e

# The head gives up on a silent node after 3 s; a cut-off agent stops its tasks after 6 s. (Shorter
# times let a loaded 2-core machine declare a healthy node lost now and then, restarting its jobs.)
FAST_LOSS = ["--grace", "1", "--heartbeat-interval", "0.5", "--node-timeout", "3", "--agent-lease", "6"]


def lifelines(path: Path, seconds: float) -> str:
    """A job that appends "MARKER TIME" to ``path`` ten times a second for ``seconds``."""
    rounds = int(seconds * 10)
    return f'for i in $(seq {rounds}); do echo "$CORRAL_TASK_MARKER $(date +%s.%N)" >> {path}; sleep 0.1; done'


def spans(path: Path) -> dict[str, list[tuple[float, float]]]:
    """Each attempt's signs of life (keyed by node and task), as (time, time) pairs."""
    found: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for line in path.read_text().splitlines():
        marker, _, stamp = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            found[marker].append((float(stamp), float(stamp)))
    return found


@pytest.mark.timeout(180)
def test_a_node_killed_with_its_tasks_and_kept_down_sends_its_jobs_to_the_others(make_cluster, tmp_path):
    cluster = make_cluster(FAST_LOSS)
    for node in ("k1", "k2", "k3"):
        cluster.start_agent(node, "2xH100:80GB")
    cluster.wait_ready("k1", "k2", "k3")
    with cluster.client() as client:
        ids = [
            client.submit({"command": "sleep 4", "resources": {"gpus": 1}, "max_restarts": 2})["id"] for _ in range(6)
        ]
        running = wait_for(
            lambda: (jobs := [client.job(i) for i in ids]) and all(j["state"] == "RUNNING" for j in jobs) and jobs,
            60,
            "all six jobs to run",
        )
        victims = {j["id"] for j in running if j["allocation"][0]["node"] == "k1"}
        assert len(victims) == 2  # two GPUs on each of three nodes, six jobs
        cluster.kill_node("k1")

        def ended():
            jobs = [client.job(i) for i in ids]
            return jobs if all(j["state"] in cluster.TERMINAL for j in jobs) else None

        jobs = {j["id"]: j for j in wait_for(ended, 90, "every job to end", interval_s=0.5)}
        nodes = {n["name"]: n for n in client.nodes()}
        events = all_events(client)
    assert {j["state"] for j in jobs.values()} == {"SUCCEEDED"}, {i: j["reason"] for i, j in jobs.items()}
    for victim in victims:
        assert jobs[victim]["restarts"] == 1
        assert jobs[victim]["allocation"][0]["node"] in ("k2", "k3")
    assert all(jobs[i]["restarts"] == 0 for i in ids if i not in victims)
    assert nodes["k1"]["state"] == "NOT_READY"
    assert double_holds(events) == [] and still_held(events) == []


@pytest.fixture
def network():
    reason = netns.unavailable_reason()
    if reason is not None:
        print(f"skipping: network namespaces are needed to cut a node off ({reason})")
        pytest.skip(f"network namespaces are needed to cut a node off: {reason}")
    made = netns.Network.create()
    try:
        yield made
    finally:
        made.close()


@pytest.mark.timeout(180)
def test_a_node_cut_off_from_the_network_is_fenced_and_the_job_never_runs_twice(make_cluster, network, tmp_path):
    for name in ("p1", "p2"):
        network.add_host(name)
    cluster = make_cluster(FAST_LOSS, host=network.gateway)
    for name in ("p1", "p2"):
        cluster.start_agent(name, "1xH100:80GB", prefix=network.run_in(name))
    cluster.wait_ready("p1", "p2")
    life = tmp_path / "lifelines.txt"
    with cluster.client() as client:
        job_id = client.submit({"command": lifelines(life, 6), "resources": {"gpus": 1}, "max_restarts": 1})["id"]
        job = wait_for(lambda: (j := client.job(job_id))["state"] == "RUNNING" and j, 60, "the job to run")
        cut_node = job["allocation"][0]["node"]
        first_attempt = f"CORRAL_TASK_MARKER={cut_node}:{job_id}/"
        wait_for(lambda: life.exists() and life.stat().st_size > 0, 20, "the job's first sign of life")
        network.cut(cut_node)
        cut_at = time.monotonic()

        wait_for(lambda: not processes_mentioning(first_attempt), 20, "the cut-off agent to stop its task")
        fenced_s = time.monotonic() - cut_at
        final = wait_for(
            lambda: (j := client.job(job_id))["state"] in cluster.TERMINAL and j, 60, "the job to end elsewhere"
        )
        network.heal(cut_node)
        wait_for(
            lambda: {n["name"]: n["state"] for n in client.nodes()}[cut_node] == "READY", 30, "the node to come back"
        )
        events = all_events(client)

    assert final["state"] == "SUCCEEDED", final["reason"]
    assert final["restarts"] == 1 and final["allocation"][0]["node"] != cut_node
    assert 3.0 <= fenced_s <= 12.0  # the agent's 6 s lease less its 1 s margin, less the last heartbeat's age
    log = cluster.log(cut_node)
    assert "killing all tasks" in log, log  # the agent fenced itself, on time
    assert "did not fence by the end of its lease" not in log, log  # not its watchdog, meant for a hung agent
    attempts = spans(life)
    assert len(attempts) == 2, sorted(attempts)
    assert overlapping(attempts) == [], "the job ran in two places at once"
    assert double_holds(events) == [] and still_held(events) == []
