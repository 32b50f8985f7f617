"""Applying a scheduler Plan: every placement is re-checked against the database, never trusted."""

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from corral.head.plan_apply import apply_plan
from corral.head.services.scheduling import load_snapshot
from corral.head.store.tables import GpuClaimRow, TaskRow
from corral.model import Allocation
from corral.sched import Placement, Plan, Reason, Snapshot, get_policy, schedule


def plan_for(head, job_ids, snapshot=None):
    """What one cycle would decide for only these pending jobs, on the given (possibly stale) snapshot."""
    snap = snapshot or load_snapshot(head.rt)[0]
    view = Snapshot(nodes=snap.nodes, live=snap.live, pending=tuple(j for j in snap.pending if j.id in job_ids))
    return schedule(view, get_policy("default"), head.clock.now())


def claims(head):
    with head.rt.read() as session:
        return sorted((c.node, c.gpu_index, c.fraction, c.job_id) for c in session.scalars(select(GpuClaimRow)))


def task_count(head, job_id):
    with head.rt.read() as session:
        return session.scalar(select(func.count()).select_from(TaskRow).where(TaskRow.job_id == job_id))


def test_two_plans_from_one_snapshot_never_double_allocate(head):
    head.register("n1", gpus=1)
    first = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    second = head.submit({"command": "b", "resources": {"gpus": 1}})["id"]
    snapshot, _ = load_snapshot(head.rt)
    plan_a, plan_b = plan_for(head, {first}, snapshot), plan_for(head, {second}, snapshot)
    assert [a.gpus for a in plan_a.placements[0].allocations] == [(0,)]
    assert [a.gpus for a in plan_b.placements[0].allocations] == [(0,)]  # both saw GPU 0 free

    assert apply_plan(head.rt, plan_a, {}).placed == 1
    result = apply_plan(head.rt, plan_b, {})
    assert (result.placed, result.skipped) == (0, 1)
    assert claims(head) == [("n1", 0, 1.0, first)]
    assert task_count(head, second) == 0
    job = head.job(second)
    assert job["state"] == "PENDING"
    assert job["allocation"] == []
    assert [t["job_id"] for t in head.agents["n1"].tasks()] == [first]


def test_a_hand_built_plan_on_a_held_gpu_is_skipped(head):
    head.register("n1", gpus=2)
    holder = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    head.cycle()
    [(_, held, _, _)] = claims(head)
    waiting = head.submit({"command": "b", "resources": {"gpus": 1}})["id"]
    stale = Plan(placements=(Placement(waiting, "H100", (Allocation("n1", (held,)),)),))
    assert apply_plan(head.rt, stale, {}).skipped == 1
    assert claims(head) == [("n1", held, 1.0, holder)]


def test_fractions_are_rechecked_too(head):
    head.register("n1", gpus=1)
    a = head.submit({"command": "a", "resources": {"gpus": 0.5}})["id"]
    b = head.submit({"command": "b", "resources": {"gpus": 0.5}})["id"]
    c = head.submit({"command": "c", "resources": {"gpus": 0.5}})["id"]
    snapshot, _ = load_snapshot(head.rt)
    assert apply_plan(head.rt, plan_for(head, {a, b}, snapshot), {}).placed == 2
    result = apply_plan(head.rt, plan_for(head, {c}, snapshot), {})
    assert result.skipped == 1
    assert sum(f for _, _, f, _ in claims(head)) == pytest.approx(1.0)


def test_applying_the_same_plan_twice_places_once(head):
    head.register("n1")
    job = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    plan = plan_for(head, {job})
    assert apply_plan(head.rt, plan, {}).placed == 1
    assert apply_plan(head.rt, plan, {}).skipped == 1
    assert task_count(head, job) == 1


def test_a_job_cancelled_after_the_snapshot_is_not_placed(head):
    head.register("n1")
    job = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    plan = plan_for(head, {job})
    head.cancel(job)
    assert apply_plan(head.rt, plan, {}).skipped == 1
    assert claims(head) == []
    assert head.job(job)["state"] == "CANCELLED"


def test_a_node_lost_after_the_snapshot_gets_nothing(head):
    head.register("n1")
    job = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    plan = plan_for(head, {job})
    head.clock.advance(11)
    head.check_nodes()
    assert apply_plan(head.rt, plan, {}).skipped == 1
    assert claims(head) == []


def test_a_gang_is_placed_whole_or_not_at_all(head):
    head.register("n1", gpus=1)
    head.register("n2", gpus=1)
    gang = head.submit({"command": "g", "nodes": 2, "resources": {"gpus": 1}})["id"]
    other = head.submit({"command": "o", "resources": {"gpus": 1}})["id"]
    snapshot, _ = load_snapshot(head.rt)
    gang_plan = plan_for(head, {gang}, snapshot)
    one = plan_for(head, {other}, snapshot)
    assert apply_plan(head.rt, one, {}).placed == 1
    assert apply_plan(head.rt, gang_plan, {}).skipped == 1
    assert task_count(head, gang) == 0
    assert [j for *_, j in claims(head)] == [other]


def test_cpus_and_memory_are_rechecked(head):
    head.register("n1", cpus=8, memory_mb=16 * 1024)
    big = {"command": "a", "resources": {"cpus": 6, "memory": "4GB"}}
    first, second = head.submit(big)["id"], head.submit(big)["id"]
    snapshot, _ = load_snapshot(head.rt)
    assert apply_plan(head.rt, plan_for(head, {first}, snapshot), {}).placed == 1
    assert apply_plan(head.rt, plan_for(head, {second}, snapshot), {}).skipped == 1


def test_reasons_are_written_only_to_pending_jobs(head):
    waiting = head.submit({"command": "a"})["id"]
    done = head.submit({"command": "b"})["id"]
    head.cancel(done)
    reasons = {waiting: Reason("RESOURCES", "waiting for Godot"), done: Reason("RESOURCES", "should not stick")}
    apply_plan(head.rt, Plan(reasons=reasons), {})
    assert head.job(waiting)["reason"] == "waiting for Godot"
    assert head.job(done)["reason"].startswith("cancelled by")


def test_other_ranks_are_handed_out_with_the_port_rank_zero_chose(head):
    n1, n2 = head.register("n1", gpus=4), head.register("n2", gpus=4)
    job = head.submit({"command": "torchrun", "nodes": 2, "resources": {"gpus": 4}})["id"]
    assert head.cycle().placed == 1
    [rank0] = [t for a in (n1, n2) for t in a.tasks()]
    assert rank0["node_rank"] == 0 and "MASTER_PORT" not in rank0["env"]
    rank0_agent, other = (n1, n2) if n1.tasks() else (n2, n1)
    other.beat([])  # not handed out yet, so not lost for being unreported
    assert [t["state"] for t in head.job(job)["tasks"]] == ["ASSIGNED", "ASSIGNED"]
    rank0_agent.beat([{**head.running(rank0), "master_port": 41234}])
    [rank1] = other.tasks()
    assert rank1["node_rank"] == 1
    assert rank1["env"]["MASTER_PORT"] == "41234"


def test_ranks_never_handed_out_free_their_gpus_when_rank_zero_fails_to_start(head):
    n1, n2 = head.register("n1", gpus=4), head.register("n2", gpus=4)
    job = head.submit({"command": "torchrun", "nodes": 2, "resources": {"gpus": 4}})["id"]
    head.cycle()
    rank0_agent = n1 if n1.tasks() else n2
    [rank0] = rank0_agent.tasks()
    rank0_agent.beat([head.exited(rank0, 127, "could not start: no such file")])
    assert head.job(job)["state"] == "FAILED"
    assert head.free_gpus("n1") == head.free_gpus("n2") == [0, 1, 2, 3]


def test_the_database_refuses_two_whole_gpu_claims_on_one_gpu(head):
    head.register("n1", gpus=1)
    job = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    head.cycle()
    task_id = f"{job}/0/0"
    with pytest.raises(IntegrityError), head.rt.write() as session:
        session.add(GpuClaimRow(node="n1", gpu_index=0, fraction=1.0, job_id=job, task_id=task_id))
    assert claims(head) == [("n1", 0, 1.0, job)]


def test_the_database_allows_fractional_claims_to_share_a_gpu(head):
    head.register("n1", gpus=1)
    job = head.submit({"command": "a", "resources": {"gpus": 0.5}})["id"]
    head.cycle()
    with head.rt.write() as session:
        session.add(GpuClaimRow(node="n1", gpu_index=0, fraction=0.5, job_id=job, task_id=f"{job}/0/0"))
    assert len(claims(head)) == 2
