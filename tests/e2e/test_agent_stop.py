"""How an agent ends: SIGINT (Ctrl-C, `corral down`) stops its tasks and leaves the node, their jobs
queued again even when a task takes its whole grace period; SIGTERM (`systemctl stop` or `restart`)
leaves the tasks running for the next agent."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

STUBBORN = "trap '' TERM; echo started; while true; do sleep 0.1; done"


@pytest.fixture
def nodes(leaving_cluster):
    yield leaving_cluster
    # Settled before a stopped agent starts again: a job its stop queued again is cancelled while pending,
    # rather than placed on the new agent and stopped there (a stubborn task takes its 5 s grace period).
    leaving_cluster.cluster.settle()
    if leaving_cluster.daemons["s1"].poll() is not None:
        leaving_cluster.restart_agent("s1")
        leaving_cluster.cluster.wait_for(lambda: _ready(leaving_cluster.cluster), 30, "the agent to register")


def _ready(cluster) -> bool:
    with cluster.client() as client:
        return any(n["name"] == "s1" and n["state"] == "READY" for n in client.nodes())


def _running(cluster, command: str) -> str:
    job_id = cluster.run("--gpus", "1", "--max-restarts", "0", command=command)
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the job to run")
    return job_id


def _task_keys(cluster, job_id: str) -> set[tuple[int, int]]:
    found = cluster.processes_mentioning(f"CORRAL_TASK_MARKER=s1:{job_id}/")
    return {key for pid, cmd in found.items() if not cmd.startswith("sleep") and (key := cluster.process_key(pid))}


@pytest.mark.timeout(60)
def test_sigint_requeues_a_job_whose_task_ignores_sigterm(nodes):
    cluster = nodes.cluster
    job_id = _running(cluster, STUBBORN)
    agent = nodes.daemons["s1"]
    agent.send_signal(signal.SIGINT)
    agent.wait(20)  # the task's 5 s grace, longer than the head's 3 s node timeout
    assert not _task_keys(cluster, job_id), "SIGINT must stop the agent's tasks"
    job = cluster.show(job_id)
    assert (job["state"], job["restarts"]) == ("PENDING", 1), job  # interrupted, whatever --max-restarts says
    assert "stopped: the agent is shutting down" in job["reason"], job
    log = (cluster.home / "logs" / "agent-s1.log").read_text(errors="replace")
    assert "could not report" not in log


@pytest.mark.timeout(60)
def test_sigterm_leaves_the_tasks_running_for_the_next_agent(nodes):
    cluster = nodes.cluster
    job_id = _running(cluster, "echo started; while true; do sleep 0.1; done")
    before = _task_keys(cluster, job_id)
    assert before
    agent = nodes.daemons["s1"]
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(10) == 0
    assert all(cluster.alive(key) for key in before), "SIGTERM must leave the tasks running"
    nodes.restart_agent("s1")
    log = cluster.home / "logs" / "agent-s1.log"
    adopted = f"re-adopting task {job_id}/"
    cluster.wait_for(lambda: adopted in log.read_text(errors="replace"), 30, "the new agent to re-adopt the task")
    job = cluster.show(job_id)
    assert (job["state"], job["restarts"]) == ("RUNNING", 0), job
    assert all(cluster.alive(key) for key in before)


@pytest.mark.timeout(30)
def test_a_bad_node_name_or_token_is_refused_up_front(nodes, tmp_path):
    cluster = nodes.cluster
    home = tmp_path / "home"
    home.mkdir()
    base = [sys.executable, "-m", "corral", "agent", "--head", cluster.url, "--fake-gpus", "1xH100:80GB"]
    env = cluster.env(CORRAL_HOME=str(home))
    for name in ("../../escape", ""):
        done = subprocess.run(
            [*base, "--token", "x", "--name", name], capture_output=True, text=True, env=env, timeout=20
        )
        assert done.returncode == 2, done.stderr
        assert "--name" in done.stderr and "Traceback" not in done.stderr
        assert not (tmp_path / "escape").exists() and list(home.iterdir()) == []
    args = [*base, "--runtime", "none", "--token", "bogus", "--name", "badtoken"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=20)
    assert done.returncode == 5, done.stderr
    assert "unknown or revoked token" in done.stderr
    assert "could not report" not in done.stderr and "Illegal header" not in done.stderr


def test_a_second_agent_of_the_same_work_directory_is_refused(nodes):
    cluster = nodes.cluster
    work_dir = cluster.home / "agents" / "s1"  # the running agent's
    args = [sys.executable, "-m", "corral", "agent", "--head", cluster.url, "--token", cluster.config()["join_token"]]
    args += ["--name", "s1", "--fake-gpus", "1xH100:80GB", "--runtime", "none", "--work-dir", str(work_dir)]
    done = subprocess.run(args, capture_output=True, text=True, env=cluster.env(), timeout=20)
    assert done.returncode == 2, done.stderr
    assert "another agent (pid" in done.stderr and "--name 's1'" in done.stderr
    assert nodes.daemons["s1"].poll() is None  # the first one runs on
    assert _ready(cluster)


def test_an_agent_given_the_name_of_a_live_node_elsewhere_leaves_it_to_that_node(nodes, tmp_path):
    cluster = nodes.cluster
    args = [sys.executable, "-m", "corral", "agent", "--head", cluster.url, "--token", cluster.config()["join_token"]]
    args += ["--name", "s1", "--fake-gpus", "4xA100:40GB", "--runtime", "none", "--work-dir", str(tmp_path / "s1")]
    done = subprocess.run(args, capture_output=True, text=True, env=cluster.env(), timeout=30)
    assert done.returncode == 1, done.stderr
    assert "node s1 is held by another agent" in done.stderr and "Traceback" not in done.stderr
    assert nodes.daemons["s1"].poll() is None  # the node's own agent runs on, its inventory as it was
    with cluster.client() as client:
        [node] = [n for n in client.nodes() if n["name"] == "s1"]
    assert node["state"] == "READY" and [g["type"] for g in node["gpus"]] == ["H100"]
