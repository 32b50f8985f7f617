"""Preemption in the head: a plan's victims and `corral preempt` stop, wait the grace period, requeue."""

from __future__ import annotations

from datetime import timedelta


def run_all(head, agent):
    tasks = agent.tasks()
    agent.beat([head.running(t) for t in tasks])
    return {t["job_id"]: t for t in tasks}


def test_a_higher_priority_job_preempts_a_preemptible_one_after_its_grace(head):
    n1 = head.register("n1", gpus=8)
    low = head.submit({"command": "train", "resources": {"gpus": 8}, "preemptible": True})["id"]
    assert head.cycle().placed == 1
    low_task = run_all(head, n1)[low]
    assert head.job(low)["state"] == "RUNNING"

    high = head.submit({"command": "urgent", "resources": {"gpus": 8}, "priority": 10})["id"]
    assert head.cycle().placed == 0  # held until the victim has let go
    victim = head.job(low)
    assert victim["state"] == "PENDING"
    assert victim["reason"] == f"preempted by job {high} (priority 10 > 0)"
    assert victim["restarts"] == 1 and victim["preemptions"] == 1
    # The new attempt has no tasks yet; the old one's is shown while it stops (it holds the GPUs).
    assert [(t["generation"], t["state"]) for t in victim["tasks"]] == [(0, "STOPPING")]
    assert victim["allocation"] == []
    assert n1.tasks() == []
    assert n1.desired()["stop_grace_s"] == {low_task["task_id"]: 30.0}  # the default preemption grace
    assert head.job(high)["reason"].startswith(f"preempting {low} (0 GPU-hours lost) to start")

    assert head.cycle().placed == 0  # the victim still holds its GPUs while it checkpoints
    assert head.job(high)["reason"].startswith(f"waiting for {low} to stop")
    assert head.job(low)["reason"] == (
        f"preempted by job {high} (priority 10 > 0); now waiting for its previous attempt to stop"
        " (SIGTERM, then SIGKILL after its grace period)"
    )
    n1.beat([head.exited(low_task, 143)])
    assert head.job(low)["tasks"] == []  # stopped: nothing of it runs
    assert head.cycle().placed == 1
    high_task = run_all(head, n1)[high]
    assert head.job(high)["state"] == "RUNNING"
    assert head.job(low)["state"] == "PENDING"
    head.cycle()  # a cycle that keeps the victim waiting: its reason still says why it was put back
    assert head.job(low)["reason"].startswith(f"preempted by job {high} (priority 10 > 0); now waiting for 1 node")

    n1.beat([head.exited(high_task, 0)])
    assert head.cycle().placed == 1  # the preempted job comes back
    again = run_all(head, n1)[low]
    assert again["generation"] == low_task["generation"] + 1
    assert again["env"]["CORRAL_RESTART_COUNT"] == "1"
    assert again["env"]["CORRAL_CHECKPOINT_DIR"] == low_task["env"]["CORRAL_CHECKPOINT_DIR"]


def test_preemption_does_not_use_up_max_restarts(head):
    n1 = head.register("n1", gpus=8)
    low = head.submit({"command": "train", "resources": {"gpus": 8}, "preemptible": True, "max_restarts": 0})["id"]
    head.cycle()
    task = run_all(head, n1)[low]
    response = head.client.post(f"/v1/jobs/{low}/preempt", headers=head.admin)
    assert response.status_code == 200, response.text
    assert response.json()["reason"] == "preempted by admin root"
    n1.beat([head.exited(task, 143)])
    assert head.cycle().placed == 1
    task = run_all(head, n1)[low]
    n1.beat([head.exited(task, 0)])
    job = head.job(low)
    assert job["state"] == "SUCCEEDED"
    assert job["restarts"] == 1 and job["preemptions"] == 1


def test_a_failure_after_a_preemption_still_ends_a_job_without_restarts(head):
    n1 = head.register("n1", gpus=8)
    job_id = head.submit({"command": "train", "resources": {"gpus": 1}, "max_restarts": 0})["id"]
    head.cycle()
    task = run_all(head, n1)[job_id]
    assert head.client.post(f"/v1/jobs/{job_id}/preempt", headers=head.admin).status_code == 200
    n1.beat([head.exited(task, 143)])
    head.cycle()
    task = run_all(head, n1)[job_id]
    n1.beat([head.exited(task, 3)])
    job = head.job(job_id)
    assert job["state"] == "FAILED" and job["exit_code"] == 3


def test_a_job_that_is_not_preemptible_is_never_a_victim(head):
    n1 = head.register("n1", gpus=8)
    low = head.submit({"command": "train", "resources": {"gpus": 8}})["id"]
    head.cycle()
    run_all(head, n1)
    high = head.submit({"command": "urgent", "resources": {"gpus": 8}, "priority": 10})["id"]
    assert head.cycle().placed == 0
    assert head.job(low)["state"] == "RUNNING"
    assert head.job(high)["reason"].startswith("waiting for 1 node with 8 free GPUs")


def test_the_victim_that_loses_the_least_work_since_its_checkpoint_is_chosen(head):
    n1 = head.register("n1", gpus=8)
    spec = {"command": "train", "resources": {"gpus": 4}, "preemptible": True}
    old = head.submit(spec)["id"]
    fresh = head.submit(spec)["id"]
    head.cycle()
    run_all(head, n1)
    head.clock.advance(3600)
    # ``fresh`` reports a checkpoint through the API, ``old`` never did: stopping ``fresh`` loses a minute.
    response = head.client.post(f"/v1/jobs/{fresh}/checkpoint", json={}, headers=head.admin)
    assert response.status_code == 200, response.text
    assert response.json()["last_checkpoint_at"] is not None
    head.clock.advance(60)
    high = head.submit({"command": "urgent", "resources": {"gpus": 4}, "priority": 5})["id"]
    run_all(head, n1)  # the node is still heard from
    head.cycle()
    assert head.job(fresh)["state"] == "PENDING"
    assert head.job(fresh)["reason"].startswith(f"preempted by job {high}")
    assert head.job(old)["state"] == "RUNNING"


def test_the_checkpoint_marker_the_agent_reports_counts_as_a_checkpoint(head):
    n1 = head.register("n1", gpus=8)
    job_id = head.submit({"command": "train", "resources": {"gpus": 1}, "preemptible": True})["id"]
    head.cycle()
    task = run_all(head, n1)[job_id]
    head.clock.advance(60)
    saved = head.clock.now() - timedelta(seconds=5)
    n1.beat([{**head.running(task), "checkpoint_at": saved.timestamp()}])
    assert head.job(job_id)["last_checkpoint_at"].startswith(saved.strftime("%Y-%m-%dT%H:%M:%S"))


def test_only_admins_preempt_and_only_running_jobs(head):
    n1 = head.register("n1", gpus=8)
    job_id = head.submit({"command": "train", "resources": {"gpus": 1}})["id"]
    alice = head.user_token("alice")
    assert head.client.post(f"/v1/jobs/{job_id}/preempt", headers=head.auth(alice)).status_code == 403
    response = head.client.post(f"/v1/jobs/{job_id}/preempt", headers=head.admin)
    assert response.status_code == 409
    assert "not RUNNING" in response.json()["detail"]
    assert head.client.post("/v1/jobs/j-nope/preempt", headers=head.admin).status_code == 404
    head.cycle()
    run_all(head, n1)
    # another user's job is not revealed to a checkpoint report
    assert head.client.post(f"/v1/jobs/{job_id}/checkpoint", json={}, headers=head.auth(alice)).status_code == 404


def test_preempting_several_jobs_with_an_unknown_one_preempts_none(head):
    n1 = head.register("n1", gpus=8)
    first = head.submit({"command": "a", "resources": {"gpus": 4}})["id"]
    second = head.submit({"command": "b", "resources": {"gpus": 4}})["id"]
    head.cycle()
    run_all(head, n1)
    ids = [first, "j-nope", second, "j-gone"]
    response = head.client.post("/v1/jobs/preempt", json={"ids": ids}, headers=head.admin)
    assert response.status_code == 404
    assert response.json()["detail"] == "no jobs 'j-nope', 'j-gone'; none of the 4 jobs given was preempted"
    for job_id in (first, second):
        job = head.job(job_id)
        assert (job["state"], job["preemptions"]) == ("RUNNING", 0)


def test_preempting_several_jobs_when_one_does_not_run_preempts_none(head):
    n1 = head.register("n1", gpus=8)
    running = head.submit({"command": "a", "resources": {"gpus": 8}})["id"]
    head.cycle()
    run_all(head, n1)
    waiting = head.submit({"command": "b", "resources": {"gpus": 8}})["id"]
    response = head.client.post("/v1/jobs/preempt", json={"ids": [running, waiting]}, headers=head.admin)
    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"job {waiting} (PENDING) is not RUNNING: only a running job can be preempted;"
        " none of the 2 jobs given was preempted"
    )
    assert head.job(running)["state"] == "RUNNING"
    alice = head.auth(head.user_token("alice"))
    assert head.client.post("/v1/jobs/preempt", json={"ids": [running]}, headers=alice).status_code == 403
    response = head.client.post("/v1/jobs/preempt", json={"ids": [running, running]}, headers=head.admin)
    assert response.status_code == 200, response.text
    [job] = response.json()  # a repeated id is preempted once
    assert (job["state"], job["preemptions"]) == ("PENDING", 1)


def checkpoint(head, job_id):
    return head.client.post(f"/v1/jobs/{job_id}/checkpoint", json={}, headers=head.admin)


def test_only_a_job_whose_processes_run_records_a_checkpoint(head):
    n1 = head.register("n1", gpus=8)
    job_id = head.submit({"command": "x", "resources": {"gpus": 8}})["id"]
    response = checkpoint(head, job_id)  # queued: nothing of it runs yet
    assert response.status_code == 409
    refusal = f"job {job_id} is PENDING, not RUNNING: only a running job can record a checkpoint"
    assert response.json()["detail"] == refusal
    assert head.job(job_id)["last_checkpoint_at"] is None
    head.cycle()
    assert checkpoint(head, job_id).status_code == 200  # placed: its processes are starting
    run_all(head, n1)
    assert checkpoint(head, job_id).status_code == 200
    assert head.client.post(f"/v1/jobs/{job_id}/preempt", headers=head.admin).status_code == 200
    assert checkpoint(head, job_id).status_code == 409  # stopping, queued again
    head.cancel(job_id)
    response = checkpoint(head, job_id)
    assert response.status_code == 409
    assert response.json()["detail"].startswith(f"job {job_id} is CANCELLED, not RUNNING")
    assert checkpoint(head, "j-nope").status_code == 404
