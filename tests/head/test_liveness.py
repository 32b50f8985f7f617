"""Clock-driven checks: lost nodes, and jobs past their time limit."""

from corral.head.store.tables import NodeRow


def run_on_n1(head, **extra):
    """n1 runs an 8-GPU job; n2 joins afterwards and stays idle. Returns (job id, task, n1, n2)."""
    n1 = head.register("n1")
    job = head.submit({"command": "train", "resources": {"gpus": 8}, **extra})
    head.cycle()
    [task] = n1.tasks()
    n1.beat([head.running(task)])
    assert head.job(job["id"])["state"] == "RUNNING"
    return job["id"], task, n1, head.register("n2")


def test_a_silent_node_is_declared_not_ready_and_its_job_requeued(head):
    job_id, _, _, n2 = run_on_n1(head, max_restarts=1)
    head.clock.advance(6)
    assert head.check_nodes() == []
    n2.beat()
    head.clock.advance(5)

    assert head.check_nodes() == ["n1"]
    node = head.nodes()["n1"]
    assert node["state"] == "NOT_READY"
    assert node["reason"] == "no heartbeat for 11s (node timeout 10s)"
    assert head.nodes()["n2"]["state"] == "READY"

    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["restarts"] == 1
    assert job["reason"].startswith("requeued (restart 1 of 1): node rank 0 lost: node n1 stopped answering")
    assert head.free_gpus("n1") == list(range(8))
    assert head.check_nodes() == []  # declared once


def test_a_silent_node_fails_jobs_without_restarts_left(head):
    job_id, _, _, n2 = run_on_n1(head)
    head.clock.advance(11)
    n2.beat()
    head.check_nodes()
    job = head.job(job_id)  # its task may still run on n1 until n1's agent fences it (its lease ends)
    assert job["state"] == "RUNNING" and "it ends FAILED once" in job["reason"]
    assert head.end_fenced_failures() == []
    head.clock.advance(head.rt.settings.agent_lease_s - 11)
    assert head.end_fenced_failures() == [job_id]
    job = head.job(job_id)
    assert job["state"] == "FAILED"
    assert "node n1 stopped answering" in job["reason"] and "it ends FAILED" not in job["reason"]
    assert job["tasks"][0]["state"] == "LOST"


def test_a_failing_job_whose_lease_ran_out_while_no_one_looked_still_ends_failed(head):
    """A head that did not look for a while (stalled, or down) still ends the jobs whose leases ran out."""
    job_id, _, _, n2 = run_on_n1(head)
    head.clock.advance(11)
    n2.beat()
    head.check_nodes()
    assert head.end_fenced_failures() == []  # looked once: the lease still runs
    head.clock.advance(head.rt.settings.agent_lease_s + 3600)  # no look for an hour past the lease
    assert head.end_fenced_failures() == [job_id]
    assert head.job(job_id)["state"] == "FAILED"


def test_a_lost_node_heartbeat_answers_409_until_it_registers_again(head):
    n1 = head.register("n1")
    head.clock.advance(11)
    head.check_nodes()
    response = n1.heartbeat()
    assert response.status_code == 409
    assert "register again" in response.json()["detail"]
    assert head.nodes()["n1"]["state"] == "NOT_READY"

    again = head.register("n1")
    assert head.nodes()["n1"]["state"] == "READY"
    assert head.nodes()["n1"]["reason"] == ""
    assert again.heartbeat().status_code == 200
    assert n1.heartbeat().status_code == 403  # the old credential is gone


def test_a_requeued_job_moves_to_another_node(head):
    job_id, _, _, n2 = run_on_n1(head, max_restarts=1)
    head.clock.advance(11)
    n2.beat()
    head.check_nodes()
    # n1's agent may still run the first attempt until its 15 s lease ends: nothing starts before.
    assert head.cycle().placed == 0
    assert "lease ends" in head.job(job_id)["reason"]
    head.clock.advance(3.5)  # 14.5 s since n1's last heartbeat
    n2.beat()
    assert head.cycle().placed == 0
    head.clock.advance(1)
    n2.beat()
    assert head.cycle().placed == 1
    [task] = n2.tasks()
    assert task["job_id"] == job_id
    assert task["generation"] == 1
    assert task["env"]["CORRAL_RESTART_COUNT"] == "1"


def test_a_node_past_its_timeout_gets_no_work_even_before_the_check(head):
    n1 = head.register("n1")
    head.clock.advance(11)
    job = head.submit({"command": "x", "resources": {"gpus": 1}})
    assert head.cycle().placed == 0
    assert "the one registered node is not ready" in head.job(job["id"])["reason"]
    n1.beat()
    assert head.cycle().placed == 1


def test_heartbeats_keep_a_node_ready(head):
    n1 = head.register("n1")
    for _ in range(5):
        head.clock.advance(8)
        n1.beat()
        assert head.check_nodes() == []
    assert head.nodes()["n1"]["last_heartbeat"] == "2025-01-01T00:00:40Z"


def test_status_counts_not_ready_nodes_gpus_as_not_free(head):
    head.register("n1")
    n2 = head.register("n2")
    head.clock.advance(11)
    n2.beat()
    head.check_nodes()
    status = head.client.get("/v1/status", headers=head.admin).json()
    assert status["nodes_ready"] == 1
    assert status["nodes_total"] == 2
    assert status["gpus_free"] == 8
    assert status["gpus_total"] == 16


def test_a_running_job_past_its_time_limit_times_out(head):
    n1 = head.register("n1")
    job = head.submit({"command": "x", "time_limit": "1m", "resources": {"gpus": 1}, "max_restarts": 3})
    head.cycle()
    head.clock.advance(30)  # time waiting to start does not count
    task = n1.tasks()[0]
    n1.beat([head.running(task)])
    head.clock.advance(59)
    n1.beat([head.running(task)])
    assert head.check_time_limits() == []
    head.clock.advance(2)
    assert head.check_time_limits() == [job["id"]]

    out = head.job(job["id"])
    assert out["state"] == "TIMEOUT"
    assert out["reason"] == "exceeded its time limit of 1m (SIGTERM, then SIGKILL after 30s)"
    assert out["restarts"] == 0  # a timeout is final, not requeued
    assert out["tasks"][0]["state"] == "STOPPING"
    assert n1.tasks() == []
    assert n1.desired()["stop_grace_s"] == {task["task_id"]: 30.0}  # time to checkpoint
    assert head.free_gpus("n1") == list(range(1, 8))
    n1.beat([head.exited(task, 143)])
    assert head.job(job["id"])["state"] == "TIMEOUT"
    assert head.free_gpus("n1") == list(range(8))
    assert head.check_time_limits() == []


def test_jobs_without_a_time_limit_never_time_out(head):
    n1 = head.register("n1")
    job = head.submit({"command": "x"})
    head.cycle()
    n1.beat([head.running(n1.tasks()[0])])
    head.clock.advance(10 * 86400)
    assert head.check_time_limits() == []
    assert head.job(job["id"])["state"] == "RUNNING"


def test_a_node_that_never_heartbeats_after_registering_is_lost(head):
    head.register("n1")
    with head.rt.read() as session:
        registered = session.get(NodeRow, "n1").last_heartbeat
    assert registered == head.clock.now()
    head.clock.advance(10.5)
    assert head.check_nodes() == ["n1"]


def test_a_jobs_own_grace_period_applies_to_its_time_limit_and_to_cancel(head):
    n1 = head.register("n1")
    timed = head.submit({"command": "x", "time_limit": "1m", "grace_period": "5s", "resources": {"gpus": 1}})
    other = head.submit({"command": "y", "grace_period": 0, "resources": {"gpus": 1}})
    head.cycle()
    tasks = {t["job_id"]: t for t in n1.tasks()}
    assert tasks[timed["id"]]["grace_s"] == 5.0
    assert tasks[other["id"]]["grace_s"] == 0.0
    n1.beat([head.running(t) for t in tasks.values()])
    head.clock.advance(61)
    assert head.check_time_limits() == [timed["id"]]
    assert head.job(timed["id"])["reason"] == "exceeded its time limit of 1m (SIGTERM, then SIGKILL after 5s)"
    assert n1.desired()["stop_grace_s"] == {tasks[timed["id"]]["task_id"]: 5.0}


def test_a_head_that_stalled_counts_node_silence_again_from_when_it_runs(head):
    """A head stopped or paused past the node timeout has not read the heartbeats sent meanwhile: its
    liveness loop must not declare the nodes lost for a silence it did not hear."""
    import asyncio
    import contextlib
    import time

    from corral.head.loops import liveness_loop

    head.register("n1")

    async def stalled() -> None:
        loop = asyncio.create_task(liveness_loop(head.rt, interval_s=0.05))
        await asyncio.sleep(0.2)  # a few checks: the node is fresh
        head.clock.advance(head.rt.settings.node_timeout_s + 5)
        time.sleep(head.rt.settings.node_timeout_s / 4 + 2.5)  # the whole head stalls (the event loop too)
        await asyncio.sleep(0.3)  # it runs again, before any heartbeat is read
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop

    asyncio.run(stalled())
    assert head.nodes()["n1"]["state"] == "READY"


def test_the_time_the_heads_event_loop_stalled_is_no_nodes_silence(head):
    """A stall shorter than the liveness loop notices (the head held by a long computation) is
    measured as it happens and taken off every node's silence; the agent's own silence still counts."""
    head.register("n1")
    stall_the_event_loop(head, 1.5)
    head.clock.advance(head.rt.settings.node_timeout_s + 1)  # 11 s, 1.5 of them the head's
    assert head.check_nodes() == []
    assert head.nodes()["n1"]["state"] == "READY"
    head.clock.advance(1)  # 12 s, 10.5 of them the agent's
    assert head.check_nodes() == ["n1"]
    reason = head.nodes()["n1"]["reason"]
    assert reason.startswith("no heartbeat for 12s, ") and "while the head itself stalled" in reason


def test_a_node_whose_heartbeat_the_head_holds_unanswered_is_not_silent(head):
    """A heartbeat that waits in the head (for a worker thread, for the database) is the head's lateness:
    the node counts as heard from its arrival until its answer leaves, and its silence runs from then."""
    head.register("n1")
    timeout = head.rt.settings.node_timeout_s
    head.clock.advance(1)
    head.rt.quiet.arrived("n1", head.rt.clock.now())
    head.clock.advance(timeout + 5)  # held all along, unanswered
    assert head.check_nodes() == []
    head.rt.quiet.answered("n1", head.rt.clock.now())
    head.clock.advance(timeout - 1)
    assert head.check_nodes() == []
    assert head.nodes()["n1"]["state"] == "READY"
    head.clock.advance(2)  # silent past the timeout since its answer left
    assert head.check_nodes() == ["n1"]


def test_the_time_the_head_stalled_does_not_keep_a_node_from_getting_work(head):
    """Scheduling judges a node's silence as the liveness check does: the head's own stalls do not count."""
    head.register("n1")
    stall_the_event_loop(head, 1.5)
    head.clock.advance(head.rt.settings.node_timeout_s + 1)  # 11 s, 1.5 of them the head's
    job = head.submit({"command": "x", "resources": {"gpus": 1}})
    assert head.cycle().placed == 1, head.job(job["id"])["reason"]


def stall_the_event_loop(head, seconds: float) -> None:
    """Run the head's lateness probe on an event loop that is then held for ``seconds`` (as a long
    computation would hold it), so the probe records the stall."""
    import asyncio
    import contextlib
    import time

    from corral.head.lateness import probe

    async def stalled() -> None:
        watch = asyncio.create_task(probe(head.rt.lateness))
        await asyncio.sleep(0.3)
        time.sleep(seconds)  # the event loop does not run
        await asyncio.sleep(0.3)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch

    asyncio.run(stalled())
