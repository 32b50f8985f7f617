"""Jobs through the head: placement, the desired state, gang start, exits, restarts and cancel."""

import pytest


@pytest.fixture
def pair(head):
    """Two 8-GPU nodes with distinct addresses."""
    return head.register("n1", addr="10.0.0.1"), head.register("n2", addr="10.0.0.2")


RENDEZVOUS_PORT = 29555


def choose_port(head, job_id, port=RENDEZVOUS_PORT):
    """Rank 0's agent starts its task and reports the rendezvous port it chose."""
    for agent in head.agents.values():
        for task in agent.tasks():
            if task["job_id"] == job_id and task["node_rank"] == 0:
                agent.beat([{**head.running(task), "state": "STARTING", "master_port": port}])
                return


def gang(head, **extra):
    spec = {"command": "torchrun train.py", "nodes": 2, "resources": {"gpus": 8}, **extra}
    job = head.submit(spec)
    assert head.cycle().placed == 1
    choose_port(head, job["id"])
    return job["id"]


def by_rank(head, job_id):
    """{rank: (agent, desired task)} for the job's current tasks."""
    out = {}
    for agent in head.agents.values():
        for task in agent.tasks():
            if task["job_id"] == job_id:
                out[task["node_rank"]] = (agent, task)
    return out


def start_all(head, job_id):
    for agent, task in by_rank(head, job_id).values():
        agent.beat([head.running(task)])


def test_a_placed_gang_appears_in_each_nodes_desired_state(head, pair):
    before = {a.name: a.desired()["version"] for a in pair}
    job_id = gang(head)
    ranks = by_rank(head, job_id)
    assert sorted(ranks) == [0, 1]
    assert {agent.name for agent, _ in ranks.values()} == {"n1", "n2"}

    master_agent, _ = ranks[0]
    master_addr = head.nodes()[master_agent.name]["address"]
    for rank, (agent, task) in ranks.items():
        assert agent.desired()["version"] > before[agent.name]
        assert task["task_id"] == f"{job_id}/0/{rank}"
        assert task["generation"] == 0
        assert task["gpus"] == list(range(8))
        assert task["command"] == "torchrun train.py"
        assert task["processes"] == 1
        assert task["rank_offset"] == rank
        assert task["grace_s"] == 5.0
        env = task["env"]
        assert env["WORLD_SIZE"] == "2"
        assert env["NNODES"] == "2"
        assert env["NODE_RANK"] == str(rank)
        assert env["MASTER_ADDR"] == master_addr
        assert env["MASTER_PORT"] == str(RENDEZVOUS_PORT)  # the one rank 0's agent chose
        assert env["CORRAL_JOB_ID"] == job_id
        assert env["CORRAL_CHECKPOINT_DIR"] == str(head.home / "checkpoints" / job_id)
        assert env["CORRAL_CHECKPOINT_DIR"] == task["checkpoint_dir"]
        assert env["CORRAL_RESTART_COUNT"] == "0"
        assert env["CORRAL_GPUS_PER_NODE"] == "8"

    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["reason"].startswith("starting on ")
    assert sorted(a["node"] for a in job["allocation"]) == ["n1", "n2"]
    assert [t["state"] for t in job["tasks"]] == ["ASSIGNED", "ASSIGNED"]
    assert head.free_gpus("n1") == head.free_gpus("n2") == []


def test_user_env_is_passed_and_cannot_override_corral_variables(head):
    head.register("n1")
    refused = head.client.post("/v1/jobs", json={"command": "x", "env": {"WORLD_SIZE": "99"}}, headers=head.admin)
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["field"] == "env"
    assert "WORLD_SIZE is set by Corral" in refused.json()["detail"][0]["msg"]
    job = head.submit({"command": "x", "env": {"HF_HOME": "/data/hf"}})
    head.cycle()
    env = head.agents["n1"].tasks()[0]["env"]
    assert env["HF_HOME"] == "/data/hf"
    assert env["WORLD_SIZE"] == "1"
    assert env["CORRAL_JOB_ID"] == job["id"]


def test_per_gpu_launcher_counts_one_rank_per_gpu(head, pair):
    job_id = gang(head, launcher="per-gpu", resources={"gpus": 4})
    ranks = by_rank(head, job_id)
    for rank, (_, task) in ranks.items():
        assert task["processes"] == 4
        assert task["rank_offset"] == 4 * rank
        assert task["env"]["WORLD_SIZE"] == "8"
        assert task["env"]["LOCAL_WORLD_SIZE"] == "4"
        assert len(task["gpus"]) == 4


def test_a_gang_runs_only_when_every_task_runs(head, pair):
    job_id = gang(head)
    ranks = by_rank(head, job_id)
    agent, task = ranks[0]
    agent.beat([head.running(task)])
    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["started_at"] is None
    assert [t["state"] for t in job["tasks"]] == ["RUNNING", "ASSIGNED"]

    head.clock.advance(3)
    agent, task = ranks[1]
    agent.beat([head.running(task)])
    job = head.job(job_id)
    assert job["state"] == "RUNNING"
    assert job["started_at"] == "2025-01-01T00:00:03Z"
    assert job["reason"] == "running on n1, n2"


def test_repeated_running_reports_change_nothing(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    start_all(head, job_id)
    assert head.job(job_id)["state"] == "RUNNING"


def test_all_ranks_exit_zero_is_success_and_frees_the_gpus(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    head.clock.advance(60)
    ranks = by_rank(head, job_id)
    agent, task = ranks[0]
    agent.beat([head.exited(task, 0)])
    assert head.job(job_id)["state"] == "RUNNING"
    assert head.free_gpus(agent.name) == list(range(8))

    agent, task = ranks[1]
    agent.beat([head.exited(task, 0)])
    job = head.job(job_id)
    assert job["state"] == "SUCCEEDED"
    assert job["exit_code"] == 0
    assert job["finished_at"] == "2025-01-01T00:01:00Z"
    assert head.free_gpus("n1") == head.free_gpus("n2") == list(range(8))
    assert all(a.tasks() == [] for a in pair)


def test_a_job_that_finishes_before_it_is_seen_running_still_succeeds(head):
    agent = head.register("n1")
    job = head.submit({"command": "true"})
    head.cycle()
    agent.beat([head.exited(agent.tasks()[0], 0)])
    job = head.job(job["id"])
    assert job["state"] == "SUCCEEDED"
    assert job["started_at"] is not None


def test_one_failing_rank_tears_the_gang_down_and_fails_the_job(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    ranks = by_rank(head, job_id)
    failed_agent, failed_task = ranks[1]
    other_agent, other_task = ranks[0]
    version = other_agent.desired()["version"]

    failed_agent.beat([head.exited(failed_task, 3)])
    job = head.job(job_id)
    # Not FAILED yet: rank 0 takes its grace period first, and `corral wait` waits for it.
    assert job["state"] == "RUNNING" and job["finished_at"] is None
    assert job["reason"] == (
        f"node rank 1 on node {failed_agent.name} failed: exit code 3; it ends FAILED once its other ranks have stopped"
    )
    states = {t["node_rank"]: t["state"] for t in job["tasks"]}
    assert states == {0: "STOPPING", 1: "EXITED"}

    # The surviving rank leaves its node's desired state at once (a new version) ...
    desired = other_agent.desired()
    assert desired["version"] > version
    assert desired["tasks"] == []
    # ... but its GPUs stay held until the agent says the processes are gone.
    assert head.free_gpus(failed_agent.name) == list(range(8))
    assert head.free_gpus(other_agent.name) == []
    other_agent.beat([head.running(other_task)], applied=version)
    assert head.free_gpus(other_agent.name) == []
    other_agent.beat([head.exited(other_task, 143)])
    assert head.free_gpus(other_agent.name) == list(range(8))
    job = head.job(job_id)
    assert job["state"] == "FAILED" and job["finished_at"] is not None
    assert job["exit_code"] == 3
    assert job["reason"] == f"node rank 1 on node {failed_agent.name} failed: exit code 3"


def test_a_failing_gang_whose_other_node_is_lost_while_stopping_ends_failed(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    ranks = by_rank(head, job_id)
    failed_agent, failed_task = ranks[1]
    failed_agent.beat([head.exited(failed_task, 3)])
    assert head.job(job_id)["state"] == "RUNNING"
    head.clock.advance(head.rt.settings.node_timeout_s + 1)
    failed_agent.beat()  # the failed rank's node stays; the other one falls silent while stopping
    head.check_nodes()
    head.clock.advance(head.rt.settings.agent_lease_s)  # its agent has surely stopped it by now
    head.end_fenced_failures()
    job = head.job(job_id)
    assert job["state"] == "FAILED" and job["exit_code"] == 3
    assert job["reason"].startswith(f"node rank 1 on node {failed_agent.name} failed: exit code 3")
    assert "it ends FAILED once" not in job["reason"]


def test_a_signal_exit_is_named_in_the_reason(head):
    agent = head.register("n1")
    job = head.submit({"command": "x"})
    head.cycle()
    agent.beat([head.exited(agent.tasks()[0], 137, detail="out of memory")])
    job = head.job(job["id"])
    assert job["state"] == "FAILED"
    assert "killed by signal SIGKILL (exit code 137)" in job["reason"]
    assert "out of memory" in job["reason"]


@pytest.mark.parametrize(
    ("code", "detail", "said"),
    [
        (255, "exit code 255", "failed: exit code 255"),
        (200, "exit code 200", "failed: exit code 200"),
        (137, "killed by signal SIGKILL", "failed: killed by signal SIGKILL (exit code 137)"),
        (
            143,
            "killed by signal SIGTERM: rank 0 (pid 7)",
            "failed: killed by signal SIGTERM (exit code 143): rank 0 (pid 7)",
        ),
    ],
)
def test_an_exit_above_128_is_a_signal_only_when_one_has_that_number(head, code, detail, said):
    agent = head.register("n1")
    job = head.submit({"command": "x"})
    head.cycle()
    agent.beat([head.exited(agent.tasks()[0], code, detail=detail)])
    reason = head.job(job["id"])["reason"]
    assert reason.endswith(said), reason  # the agent's words are not repeated


def test_a_task_its_agent_could_not_start_gets_no_shell_hint(head):
    agent = head.register("n1")
    job = head.submit({"command": "x"})
    head.cycle()
    detail = "could not start: cannot start ['/bin/sh', '-c', …] in /w: [Errno 7] Argument list too long"
    agent.beat([head.exited(agent.tasks()[0], 127, detail=detail)])
    reason = head.job(job["id"])["reason"]
    assert reason.endswith(f"failed: exit code 127 ({detail})"), reason


def test_a_command_the_shell_cannot_find_says_so_in_the_reason(head):
    agent = head.register("n1")
    job = head.submit({"command": "nosuchcmd"})
    head.cycle()
    agent.beat([head.exited(agent.tasks()[0], 127)])
    reason = head.job(job["id"])["reason"]
    assert "exit code 127; the shell found no such command" in reason
    assert f"corral logs {job['id']}" in reason


def test_gpus_free_when_the_agent_stops_listing_a_stopped_task(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    ranks = by_rank(head, job_id)
    failed_agent, failed_task = ranks[0]
    other_agent, _ = ranks[1]
    stale_version = other_agent.applied
    failed_agent.beat([head.exited(failed_task, 1)])

    # An agent that has not yet acted on the stop and omits the task keeps the GPUs held.
    other_agent.beat([], applied=stale_version)
    assert head.free_gpus(other_agent.name) == []
    # Once it has applied the version that stopped the task, omitting it means it is gone.
    current = other_agent.desired()["version"]
    other_agent.beat([], applied=current)
    assert head.free_gpus(other_agent.name) == list(range(8))
    task = next(t for t in head.job(job_id)["tasks"] if t["node"] == other_agent.name)
    assert task["state"] == "EXITED"


def test_the_next_cycle_sees_gpus_only_once_they_are_freed(head):
    agent = head.register("n1", gpus=8)
    first = head.submit({"command": "a", "resources": {"gpus": 8}})
    head.cycle()
    task = agent.tasks()[0]
    agent.beat([head.running(task)])
    second = head.submit({"command": "b", "resources": {"gpus": 8}})
    head.cycle()
    head.cancel(first["id"])
    assert head.cycle().placed == 0
    assert head.job(second["id"])["state"] == "PENDING"
    agent.beat([head.exited(task, 143)])
    assert head.cycle().placed == 1
    assert [t["job_id"] for t in agent.tasks()] == [second["id"]]


def test_a_failed_rank_requeues_when_restarts_are_left(head, pair):
    job_id = gang(head, max_restarts=2)
    start_all(head, job_id)
    ranks = by_rank(head, job_id)
    failed_agent, failed_task = ranks[1]
    other_agent, other_task = ranks[0]
    failed_agent.beat([head.exited(failed_task, 3)])

    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["restarts"] == 1
    assert job["exit_code"] is None
    assert job["reason"].startswith("requeued (restart 1 of 2): ")
    assert f"node rank 1 on node {failed_agent.name} failed: exit code 3" in job["reason"]
    # The new attempt has no tasks yet; the old attempt's other rank is shown while it stops.
    assert [(t["generation"], t["node_rank"], t["state"]) for t in job["tasks"]] == [(0, 0, "STOPPING")]
    assert job["allocation"] == []

    # The old attempt still holds the other node's GPUs: no room for the gang yet.
    assert head.cycle().placed == 0
    other_agent.beat([head.exited(other_task, 143)])
    assert head.cycle().placed == 1
    choose_port(head, job_id)

    new = by_rank(head, job_id)
    for rank, (_, task) in new.items():
        assert task["task_id"] == f"{job_id}/1/{rank}"
        assert task["generation"] == 1
        assert task["env"]["CORRAL_RESTART_COUNT"] == "1"
        assert task["env"]["CORRAL_GENERATION"] == "1"
        assert task["env"]["CORRAL_CHECKPOINT_DIR"] == str(head.home / "checkpoints" / job_id)
    start_all(head, job_id)
    job = head.job(job_id)
    assert job["state"] == "RUNNING"
    assert {t["generation"] for t in job["tasks"]} == {1}


def test_restarts_run_out_then_the_job_fails(head):
    agent = head.register("n1")
    job = head.submit({"command": "x", "max_restarts": 1})
    for expected in ("PENDING", "FAILED"):
        head.cycle()
        agent.beat([head.exited(agent.tasks()[0], 2)])
        assert head.job(job["id"])["state"] == expected
    job = head.job(job["id"])
    assert job["restarts"] == 1
    assert job["exit_code"] == 2
    assert job["reason"].endswith("no restarts left (max_restarts=1)")


def test_reports_with_a_stale_generation_are_ignored(head):
    agent = head.register("n1")
    job = head.submit({"command": "x", "max_restarts": 1, "resources": {"gpus": 1}})
    head.cycle()
    old = agent.tasks()[0]
    agent.beat([head.exited(old, 1)])
    head.cycle()
    new = agent.tasks()[0]
    assert new["generation"] == 1

    # The same task id with an older generation, and the old attempt's own report again.
    stale = {**head.exited(new, 9), "generation": 0}
    agent.beat([stale, head.exited(old, 9)])
    job_now = head.job(job["id"])
    assert job_now["state"] == "PENDING"
    assert job_now["restarts"] == 1
    assert [t["state"] for t in job_now["tasks"]] == ["ASSIGNED"]
    assert head.free_gpus("n1") == list(range(1, 8))

    agent.beat([head.running(new)])
    assert head.job(job["id"])["state"] == "RUNNING"


def test_a_node_cannot_report_on_another_nodes_task(head, pair):
    job = head.submit({"command": "x", "resources": {"gpus": 8}})
    head.cycle()
    owner, other = pair if pair[0].tasks() else pair[::-1]
    task = owner.tasks()[0]
    other.beat([head.exited(task, 1)])
    out = head.job(job["id"])
    assert out["state"] == "PENDING"
    assert out["tasks"][0]["state"] == "ASSIGNED"
    other.beat([head.running(task)])
    assert head.job(job["id"])["tasks"][0]["state"] == "ASSIGNED"
    assert head.free_gpus(owner.name) == []


def test_reports_for_unknown_tasks_are_ignored(head):
    agent = head.register("n1")
    ghost = {"task_id": "j-ghost/0/0", "generation": 0, "state": "EXITED", "exit_code": 1}
    assert agent.beat([ghost])["tasks"] == []


def test_an_assigned_task_the_agent_says_it_does_not_run_is_lost(head):
    agent = head.register("n1")
    job = head.submit({"command": "x", "resources": {"gpus": 2}})
    head.cycle()
    # The agent applied the version that assigned the task, yet does not list it.
    agent.beat([], applied=agent.desired()["version"])
    job = head.job(job["id"])
    assert job["state"] == "FAILED"
    assert "node rank 0 lost: the agent on n1 does not run it" in job["reason"]
    assert job["tasks"][0]["state"] == "LOST"
    assert head.free_gpus("n1") == list(range(8))


def test_an_agent_that_has_not_seen_the_assignment_keeps_it(head):
    agent = head.register("n1")
    job = head.submit({"command": "x"})
    head.cycle()
    agent.beat([], applied=agent.applied)  # the version from before the assignment
    assert head.job(job["id"])["tasks"][0]["state"] == "ASSIGNED"


def test_a_gpu_one_fractional_job_holds_is_shared_by_it_alone(head):
    head.register("n1", gpus=2)
    job = head.submit({"command": "a", "resources": {"gpus": 0.5}})
    whole = head.submit({"command": "b", "resources": {"gpus": 1}})
    assert head.cycle().placed == 2
    gpus = {g["allocated_to"]: g for g in head.nodes()["n1"]["gpus"]}
    assert (gpus[job["id"]]["allocated_fraction"], gpus[job["id"]]["shared_by"]) == (0.5, [job["id"]])
    assert (gpus[whole["id"]]["allocated_fraction"], gpus[whole["id"]]["shared_by"]) == (1.0, [])


def test_fractional_jobs_share_a_gpu(head):
    agent = head.register("n1", gpus=1)
    first = head.submit({"command": "a", "resources": {"gpus": 0.5}})
    second = head.submit({"command": "b", "resources": {"gpus": 0.5}})
    third = head.submit({"command": "c", "resources": {"gpus": 0.5}})
    assert head.cycle().placed == 2
    gpu = head.nodes()["n1"]["gpus"][0]
    assert gpu["allocated_fraction"] == 1.0
    assert sorted(gpu["shared_by"]) == sorted([first["id"], second["id"]])
    assert all(t["gpus"] == [0] for t in agent.tasks())
    assert head.job(third["id"])["state"] == "PENDING"
    assert head.job(first["id"])["allocation"] == [{"node": "n1", "gpus": [0], "gpu_fraction": 0.5}]
    for task in agent.tasks():  # each gets half the GPU's SMs and memory (80GB in the harness)
        assert task["env"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert task["env"]["CORRAL_GPU_MEMORY_LIMIT_MB"] == str(40 * 1024)


def test_a_cpu_only_job_holds_no_share_of_a_gpu(head):
    head.register("n1", gpus=1)
    job = head.submit({"command": "a", "resources": {"cpus": 2}})
    assert head.cycle().placed == 1
    assert head.job(job["id"])["allocation"] == [{"node": "n1", "gpus": [], "gpu_fraction": 0.0}]
    events = head.client.get("/v1/events", params={"job": job["id"]}, headers=head.admin).json()
    [placed] = [e for e in events if e["kind"] == "job.placed"]
    assert [t["fraction"] for t in placed["data"]["tasks"]] == [0.0]
    whole = head.submit({"command": "b", "resources": {"gpus": 1}})
    head.cycle()
    assert head.job(whole["id"])["allocation"] == [{"node": "n1", "gpus": [0], "gpu_fraction": 1.0}]


def test_a_quarter_gpu_gets_a_quarter_of_the_memory_and_whole_gpus_get_no_limit(head):
    agent = head.register("n1", gpus=2)
    quarter = head.submit({"command": "a", "resources": {"gpus": 0.25}})["id"]
    whole = head.submit({"command": "b", "resources": {"gpus": 1}})["id"]
    head.cycle()
    env = {t["job_id"]: t["env"] for t in agent.tasks()}
    assert env[quarter]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert env[quarter]["CORRAL_GPU_MEMORY_LIMIT_MB"] == str(20 * 1024)
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env[whole]
    assert "CORRAL_GPU_MEMORY_LIMIT_MB" not in env[whole]


def test_cancel_ends_the_job_at_once_and_holds_gpus_until_the_exit(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    ranks = by_rank(head, job_id)
    head.clock.advance(5)
    job = head.cancel(job_id)
    assert job["state"] == "CANCELLED"
    assert job["reason"] == "cancelled by " + job["user"]
    assert job["finished_at"] == "2025-01-01T00:00:05Z"
    assert [t["state"] for t in job["tasks"]] == ["STOPPING", "STOPPING"]
    for agent, _ in ranks.values():
        assert agent.tasks() == []
        assert head.free_gpus(agent.name) == []

    for agent, task in ranks.values():
        agent.beat([head.exited(task, 143)])
        assert head.free_gpus(agent.name) == list(range(8))
    job = head.job(job_id)
    assert job["state"] == "CANCELLED"
    assert job["exit_code"] is None
    assert [t["state"] for t in job["tasks"]] == ["EXITED", "EXITED"]


def test_cancel_of_a_pending_job_keeps_it_from_being_placed(head):
    head.register("n1")
    job = head.submit({"command": "x"})
    assert head.cancel(job["id"])["state"] == "CANCELLED"
    assert head.cycle().placed == 0
    assert head.agents["n1"].tasks() == []


def test_cancel_of_a_finished_job_changes_nothing(head):
    agent = head.register("n1")
    job = head.submit({"command": "x"})
    head.cycle()
    agent.beat([head.exited(agent.tasks()[0], 0)])
    assert head.cancel(job["id"])["state"] == "SUCCEEDED"


def test_cancel_many(head):
    first, second = head.submit({"command": "a"}), head.submit({"command": "b"})
    response = head.client.post("/v1/jobs/cancel", json={"ids": [first["id"], second["id"]]}, headers=head.admin)
    assert response.status_code == 200
    assert [j["state"] for j in response.json()] == ["CANCELLED", "CANCELLED"]


def test_a_task_still_starting_is_not_declared_lost(head, pair):
    job_id = head.submit({"command": "python train.py", "resources": {"gpus": 1}})["id"]
    head.cycle()
    [(agent, task)] = by_rank(head, job_id).values()
    starting = {"task_id": task["task_id"], "generation": task["generation"], "state": "STARTING"}
    agent.beat([starting], applied=agent.desired()["version"])
    assert [t["state"] for t in head.job(job_id)["tasks"]] == ["ASSIGNED"]
    assert head.job(job_id)["state"] == "PENDING"
    agent.beat([head.running(task)])
    assert head.job(job_id)["state"] == "RUNNING"


def test_an_applied_task_the_agent_does_not_report_is_lost(head, pair):
    job_id = head.submit({"command": "python train.py", "resources": {"gpus": 1}})["id"]
    head.cycle()
    [(agent, _task)] = by_rank(head, job_id).values()
    agent.beat([], applied=agent.desired()["version"])
    job = head.job(job_id)
    assert job["state"] == "FAILED"
    assert "does not run it" in job["reason"]


def test_a_task_interrupted_by_its_agent_shutting_down_is_requeued_whatever_the_budget(head, pair):
    job_id = head.submit({"command": "python train.py", "resources": {"gpus": 1}, "max_restarts": 0})["id"]
    head.cycle()
    [(agent, task)] = by_rank(head, job_id).values()
    agent.beat([head.running(task)])
    stopped = {**head.exited(task, 143, "stopped: the agent is shutting down"), "interrupted": True}
    agent.beat([stopped])
    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["restarts"] == 1
    assert "agent is shutting down" in job["reason"]
    assert head.cycle().placed == 1


def test_the_agent_naming_the_failed_process_is_part_of_the_reason_not_repeated(head, pair):
    job_id = gang(head)
    start_all(head, job_id)
    failed_agent, failed_task = by_rank(head, job_id)[1]
    failed_agent.beat([head.exited(failed_task, 9, "exit code 9 (the process with RANK 3)")])
    job = head.job(job_id)
    assert job["reason"].startswith(
        f"node rank 1 on node {failed_agent.name} failed: exit code 9 (the process with RANK 3); it ends FAILED"
    )


def test_a_node_lost_while_its_gang_was_torn_down_is_named_beside_the_rank_blamed(head, pair):
    job_id = gang(head, max_restarts=1)
    ranks = by_rank(head, job_id)
    start_all(head, job_id)
    (survivor, survivor_task), (dead, _) = ranks[0], ranks[1]
    survivor.beat([head.exited(survivor_task, 1)])  # its peer's connection broke when the peer's node died
    reason = head.job(job_id)["reason"]
    assert reason.startswith(f"requeued (restart 1 of 1): node rank 0 on node {survivor.name} failed: exit code 1")
    head.clock.advance(11)
    survivor.beat()
    assert head.check_nodes() == [dead.name]
    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["reason"].startswith(reason)
    assert f"; node {dead.name} (node rank 1) was lost meanwhile: node {dead.name} stopped answering" in job["reason"]
    head.cycle()  # the cause stays in front of what the job now waits for
    assert f"node {dead.name} (node rank 1) was lost meanwhile" in head.job(job_id)["reason"]


@pytest.mark.parametrize(
    ("code", "hint"),
    [
        (125, "the container runtime failed before the command ran"),
        (126, "the container runtime, or the image's shell, could not run the command"),
    ],
)
def test_a_container_job_that_could_not_run_points_at_the_runtime_too(head, code, hint):
    agent = head.register("n1", container_runtime="podman")
    job = head.submit({"command": "x", "image": "busybox:1"})
    head.cycle()
    agent.beat([head.exited(agent.tasks()[0], code)])
    reason = head.job(job["id"])["reason"]
    assert reason.endswith(f"exit code {code}; {hint}: `corral logs {job['id']}` says which"), reason
    assert "check the command" not in reason


def test_the_sm_shares_of_one_gpu_never_add_up_to_more_than_all_of_it(head):
    """Fractions that fill a GPU get whole percents that fill at most 100 between them, rounded down as
    the memory is: 0.335 + 0.335 + 0.33 is 33 + 33 + 33, not 34 + 34 + 33; 0.995 is 99, not the whole GPU."""
    agent = head.register("n1", gpus=3)
    thirds = [head.submit({"command": "a", "resources": {"gpus": g}})["id"] for g in (0.335, 0.335, 0.33)]
    nearly = head.submit({"command": "b", "resources": {"gpus": 0.995}})["id"]
    odd = head.submit({"command": "c", "resources": {"gpus": 0.29}})["id"]
    head.cycle()
    env = {t["job_id"]: t["env"] for t in agent.tasks()}
    assert [env[j]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] for j in thirds] == ["33", "33", "33"]
    assert env[nearly]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "99"
    assert env[odd]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "29"
