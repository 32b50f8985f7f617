"""An agent restart alone (an upgrade, a crash of the agent process) is not a node loss: the new
agent re-adopts the tasks it finds running if the head still wants them, and stops them otherwise."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture
def nodes(restartable_cluster):
    yield restartable_cluster
    restartable_cluster.cluster.settle()


def _task_processes(cluster, node: str, job_id: str) -> set[tuple[int, int]]:
    """The task's lasting processes (its shells; not the short ``sleep`` they keep starting): those found in
    two scans half a second apart. A shell's child forked to run ``sleep 0.1`` shows the shell's command line
    until it runs ``sleep``, and lives a tenth of a second: one scan may find it, not both."""

    def scan() -> set[tuple[int, int]]:
        found = cluster.processes_mentioning(f"CORRAL_TASK_MARKER={node}:{job_id}/")
        return {
            key
            for pid, cmdline in found.items()
            if not cmdline.startswith("sleep") and (key := cluster.process_key(pid))
        }

    first = scan()
    time.sleep(0.5)
    return first & scan()


def _agent_log(cluster, node: str) -> str:
    return (cluster.home / "logs" / f"agent-{node}.log").read_text(errors="replace")


def _waiting_job(cluster, tmp_path, nodes: int, exit_code: int) -> tuple[str, object]:
    flag = tmp_path / "finish"
    command = f"echo started; while [ ! -e {flag} ]; do sleep 0.1; done; echo finishing; exit {exit_code}"
    job_id = cluster.run("--nodes", str(nodes), "--gpus", "1", command=command)
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the job to run")
    return job_id, flag


def _restart_agent_of_rank_0(nodes, job_id: str) -> tuple[str, set[tuple[int, int]]]:
    cluster = nodes.cluster
    node = next(t["node"] for t in cluster.show(job_id)["tasks"] if t["node_rank"] == 0)
    before = _task_processes(cluster, node, job_id)
    assert before
    nodes.kill_agent(node)  # SIGKILL, the agent alone
    assert all(cluster.alive(key) for key in before), "the tasks outlive their agent"
    nodes.restart_agent(node)
    adopted = f"re-adopting task {job_id}/"
    cluster.wait_for(lambda: adopted in _agent_log(cluster, node), 30, "the new agent to re-adopt the task")
    return node, before


@pytest.mark.timeout(90)
def test_a_restarted_agent_re_adopts_its_running_tasks_and_reports_their_success(nodes, tmp_path):
    cluster = nodes.cluster
    job_id, flag = _waiting_job(cluster, tmp_path, nodes=2, exit_code=0)
    node, before = _restart_agent_of_rank_0(nodes, job_id)

    assert _task_processes(cluster, node, job_id) == before, "the same processes run on"
    job = cluster.show(job_id)
    assert (job["state"], job["restarts"]) == ("RUNNING", 0)
    flag.touch()
    cluster.wait_ok(job_id, timeout=30)
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"], job["restarts"]) == ("SUCCEEDED", 0, 0)
    assert "finishing" in cluster.ok("logs", job_id)  # the adopted rank's log still reaches the head


@pytest.mark.timeout(90)
def test_an_adopted_task_that_fails_is_reported_with_its_own_exit_code(nodes, tmp_path):
    cluster = nodes.cluster
    job_id, flag = _waiting_job(cluster, tmp_path, nodes=1, exit_code=4)
    _restart_agent_of_rank_0(nodes, job_id)

    flag.touch()
    cluster.wait(job_id, timeout=30)
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"]) == ("FAILED", 4), (job, _agent_log(cluster, job["tasks"][0]["node"]))
    assert "exit code 4" in job["reason"]


@pytest.mark.timeout(90)
def test_a_task_the_head_no_longer_wants_is_stopped_by_the_restarted_agent(nodes, tmp_path):
    cluster = nodes.cluster
    job_id, _ = _waiting_job(cluster, tmp_path, nodes=1, exit_code=0)
    node = cluster.show(job_id)["tasks"][0]["node"]
    before = _task_processes(cluster, node, job_id)
    nodes.kill_agent(node)
    cluster.ok("cancel", job_id)  # while no agent runs there
    assert all(cluster.alive(key) for key in before)

    nodes.restart_agent(node)
    cluster.wait_for(lambda: not any(cluster.alive(key) for key in before), 15, "the unwanted task to be stopped")
    assert f"stopping task {job_id}/0/0, left running by an earlier agent: not wanted any more" in _agent_log(
        cluster, node
    )
    assert cluster.show(job_id)["state"] == "CANCELLED"
    cluster.wait_for(
        lambda: all(g["allocated_to"] is None for n in cluster.api_nodes() for g in n["gpus"]),
        15,
        "its GPU to be free",
    )


@pytest.mark.timeout(90)
def test_a_task_that_ends_while_no_agent_runs_is_reported_with_its_exit_code(nodes, tmp_path):
    cluster = nodes.cluster
    job_id, flag = _waiting_job(cluster, tmp_path, nodes=1, exit_code=4)
    node = cluster.show(job_id)["tasks"][0]["node"]
    before = _task_processes(cluster, node, job_id)
    nodes.kill_agent(node)
    flag.touch()
    cluster.wait_for(lambda: not any(cluster.alive(key) for key in before), 15, "the task to end")

    nodes.restart_agent(node)
    cluster.wait(job_id, timeout=30)
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"], job["restarts"]) == ("FAILED", 4, 0), job
    assert "exit code 4 while the agent was away" in job["reason"]


@pytest.mark.timeout(90)
def test_output_written_while_no_agent_ran_reaches_the_head_when_an_agent_comes_back(nodes, tmp_path):
    cluster = nodes.cluster
    job_id, flag = _waiting_job(cluster, tmp_path, nodes=1, exit_code=0)
    node = cluster.show(job_id)["allocation"][0]["node"]
    nodes.kill_agent(node)  # the task runs on, unwatched
    flag.touch()  # it prints its last line and ends while no agent runs
    cluster.wait_for(lambda: not _task_processes(cluster, node, job_id), 10, "the task to end")
    nodes.restart_agent(node)
    cluster.wait_ok(job_id, timeout=30)
    assert cluster.ok("logs", job_id).split() == ["started", "finishing"]
