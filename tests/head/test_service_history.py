"""The head fills in what ``default`` reads: service received (demotion) and finished jobs' sizes (order)."""

from __future__ import annotations

from typing import Any

from corral.head.services import serving_loop
from corral.head.services.scheduling import load_snapshot


def run_all(head: Any, agent: Any) -> dict[str, dict[str, Any]]:
    tasks = agent.tasks()
    agent.beat([head.running(t) for t in tasks])
    return {t["job_id"]: t for t in tasks}


def job_spec(gpus: int = 4, **extra: Any) -> dict[str, Any]:
    return {"command": "train", "resources": {"gpus": gpus}, "preemptible": True, **extra}


def finish(head: Any, agent: Any, user_token: str, seconds: float) -> None:
    """Run one 4-GPU job of the token's user for ``seconds`` to success."""
    job = head.submit(job_spec(), user_token)["id"]
    assert head.cycle().placed == 1
    task = run_all(head, agent)[job]
    head.clock.advance(seconds)
    agent.beat([head.exited(task, 0)])
    assert head.job(job)["state"] == "SUCCEEDED"


def assert_the_short_user_goes_first(head: Any, agent: Any, sam: str, lou: str) -> None:
    """With the node busy, lou's then sam's job wait; when it frees, sam's (whose jobs were short) starts."""
    blocker = head.submit(job_spec(), head.user_token("ann"))["id"]
    assert head.cycle().placed == 1
    blocker_task = run_all(head, agent)[blocker]
    long_one = head.submit(job_spec(), lou)["id"]
    short_one = head.submit(job_spec(), sam)["id"]
    head.cycle()
    agent.beat([head.exited(blocker_task, 0)])
    assert head.cycle().placed == 1
    assert set(run_all(head, agent)) == {short_one}
    assert head.job(long_one)["state"] == "PENDING"


def test_a_job_past_two_gpu_hours_is_demoted_and_preempted_by_a_newer_one(head):
    n1 = head.register("n1", gpus=4)
    old = head.submit(job_spec(), head.user_token("ann"))["id"]
    assert head.cycle().placed == 1
    old_task = run_all(head, n1)[old]

    head.clock.advance(1000)
    new = head.submit(job_spec(), head.user_token("bob"))["id"]
    assert head.cycle().placed == 0
    head.clock.advance(799)  # 4 GPUs × 1,799 s: just under 7,200 GPU-seconds
    n1.beat([head.running(old_task)])
    assert head.cycle().placed == 0
    assert head.job(old)["state"] == "RUNNING"  # same size class, not demoted: first come, first served

    head.clock.advance(2)  # past 2 GPU-hours: nothing else happens, the next cycle demotes it
    n1.beat([head.running(old_task)])
    head.cycle()
    victim = head.job(old)
    assert victim["state"] == "PENDING" and victim["preemptions"] == 1
    assert victim["reason"].startswith(f"preempted by job {new}")
    n1.beat([head.exited(old_task, 143)])
    assert head.cycle().placed == 1
    assert set(run_all(head, n1)) == {new}

    # Requeued, it keeps the service it received: a newer job of its size class still goes first.
    newest = head.submit(job_spec(), head.user_token("cat"))["id"]
    assert head.cycle().placed == 0  # its estimate is taken now: no job has ended, as for the old one
    head.clock.advance(10)
    (task,) = n1.tasks()
    n1.beat([head.exited(task, 0)])
    assert head.cycle().placed == 1
    assert set(run_all(head, n1)) == {newest}


def test_a_user_whose_finished_jobs_were_short_goes_ahead_of_one_whose_jobs_were_long(head):
    n1 = head.register("n1", gpus=4)
    sam, lou = head.user_token("sam"), head.user_token("lou")
    finish(head, n1, sam, 100)  # 400 GPU-seconds
    finish(head, n1, lou, 1500)  # 6,000 GPU-seconds
    blocker = head.submit(job_spec(), head.user_token("ann"))["id"]
    assert head.cycle().placed == 1
    blocker_task = run_all(head, n1)[blocker]

    long_one = head.submit(job_spec(), lou)["id"]
    short_one = head.submit(job_spec(), sam)["id"]
    assert head.cycle().placed == 0
    assert head.job(short_one)["reason"].endswith("queue position 1 of 2")
    assert head.job(long_one)["reason"].endswith("queue position 2 of 2")
    head.clock.advance(5)
    n1.beat([head.exited(blocker_task, 0)])
    assert head.cycle().placed == 1
    assert set(run_all(head, n1)) == {short_one}


def test_a_restarted_head_rebuilds_the_history_and_keeps_the_order(tmp_path, clock, start_head):
    home = tmp_path / "home"
    with start_head(home, clock) as head:
        n1 = head.register("n1", gpus=4)
        sam, lou = head.user_token("sam"), head.user_token("lou")
        finish(head, n1, sam, 100)
        finish(head, n1, lou, 1500)
        blocker = head.submit(job_spec(), head.user_token("ann"))["id"]
        head.cycle()
        blocker_task = run_all(head, n1)[blocker]
        long_one = head.submit(job_spec(), lou)["id"]
        short_one = head.submit(job_spec(), sam)["id"]
    with start_head(home, clock) as head:
        n1.head = head
        n1.beat([head.exited(blocker_task, 0)])
        assert head.cycle().placed == 1
        assert set(run_all(head, n1)) == {short_one}
        assert head.job(long_one)["state"] == "PENDING"


def test_service_counts_every_gpu_of_a_gang_and_the_share_of_a_fractional_gpu(head):
    n1, n2, n3 = (head.register(name, gpus=4) for name in ("n1", "n2", "n3"))
    gang = head.submit(job_spec(nodes=2))["id"]
    half = head.submit(job_spec(gpus=0.5))["id"]
    assert head.cycle().placed == 2
    for agent in (n1, n2, n3):
        run_all(head, agent)
    for agent in (n1, n2, n3):  # a gang's other ranks are handed out once rank 0 has reported its port
        agent.beat([{**head.running(t), "master_port": 29500} for t in agent.tasks()])
    head.clock.advance(900)
    for agent in (n1, n2, n3):
        agent.beat([head.running(t) for t in agent.tasks()])
    head.submit(job_spec(gpus=4, nodes=3))  # waits, so the snapshot describes the running jobs
    snapshot, _ = load_snapshot(head.rt)
    attained = {r.id: r.attained_gpu_s for r in snapshot.running}
    assert attained == {gang: 8 * 900.0, half: 0.5 * 900.0}

    # Preempted, the gang keeps what it received while it waits.
    response = head.client.post(f"/v1/jobs/{gang}/preempt", headers=head.admin)
    assert response.status_code == 200, response.text
    head.clock.advance(10)  # the grace period: it still holds its GPUs
    for agent in (n1, n2, n3):
        stopping = list(agent.desired()["stop_grace_s"])
        agent.beat([{"task_id": t, "generation": 0, "state": "EXITED", "exit_code": 143} for t in stopping])
    snapshot, _ = load_snapshot(head.rt)
    pending = {j.id: j.attained_gpu_s for j in snapshot.pending}
    assert pending[gang] == 8 * 910.0


def test_a_cancelled_job_counts_once_its_tasks_are_gone_even_after_a_long_pause(head):
    n1 = head.register("n1", gpus=4)
    sam, lou = head.user_token("sam"), head.user_token("lou")
    finish(head, n1, sam, 100)
    long_run = head.submit(job_spec(), lou)["id"]
    assert head.cycle().placed == 1
    task = run_all(head, n1)[long_run]
    head.clock.advance(1500)
    head.cancel(long_run)  # 6,000 GPU-seconds so far; its processes stop after the grace period
    head.clock.advance(20)
    n1.beat([head.exited(task, 143)])
    head.clock.advance(600)  # no cycle for longer than end events are looked back for
    n1.beat()
    assert_the_short_user_goes_first(head, n1, sam, lou)


def test_a_job_ended_through_another_head_counts_on_the_leader(tmp_path, clock, start_head):
    home = tmp_path / "home"
    with start_head(home, clock) as leader, start_head(home, clock) as other:
        n1 = leader.register("n1", gpus=4)
        sam, lou = leader.user_token("sam"), leader.user_token("lou")
        finish(leader, n1, sam, 100)
        long_run = leader.submit(job_spec(), lou)["id"]
        assert leader.cycle().placed == 1
        task = run_all(leader, n1)[long_run]
        leader.clock.advance(1500)
        n1.head = other  # the agent now reports to the other head, which ends the job
        n1.beat([other.exited(task, 0)])
        assert other.job(long_run)["state"] == "SUCCEEDED"
        n1.head = leader
        assert_the_short_user_goes_first(leader, n1, sam, lou)


def test_a_service_replica_is_not_a_finished_job_like_a_batch_one(head):
    n1 = head.register("n1", gpus=4)
    sam, lou = head.user_token("sam"), head.user_token("lou")
    finish(head, n1, sam, 100)  # sam: 400 GPU-seconds
    finish(head, n1, lou, 1500)  # lou: 6,000
    service = {"name": "chat", "command": "serve", "resources": {"gpus": 4}, "replicas": {"min": 1, "max": 1}}
    response = head.client.post("/v1/services", json=service, headers=head.auth(sam))
    assert response.status_code == 201, response.text
    serving_loop.reconcile(head.rt, serving_loop.load(head.rt), {}, {})
    assert head.cycle().placed == 1
    (replica,) = n1.tasks()
    n1.beat([{**head.running(replica), "master_port": 9000}])
    head.clock.advance(100_000)  # 400,000 GPU-seconds of serving
    response = head.client.delete("/v1/services/chat", headers=head.auth(sam))
    assert response.status_code in (200, 204), response.text
    n1.beat([head.exited(replica, 143)])
    assert_the_short_user_goes_first(head, n1, sam, lou)
