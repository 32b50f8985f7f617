"""Large batches (an array of thousands of jobs placed at once, a heartbeat ending thousands of tasks)
must not hold the database's write lock so long that other nodes look silent."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from sqlalchemy import select

from corral.api import HeartbeatRequest
from corral.head import plan_apply
from corral.head.services import agents as agent_service
from corral.head.services.lifecycle import add_claims, release
from corral.head.services.liveness import check_nodes
from corral.head.store.tables import GpuClaimRow, TaskRow
from corral.model import TaskState


def _wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_a_large_plan_is_applied_in_several_transactions(head, monkeypatch):
    monkeypatch.setattr(plan_apply, "PLACEMENTS_PER_WRITE", 2)
    agent = head.register("n1", gpus=0, cpus=64)
    jobs = [head.submit({"command": "true"})["id"] for _ in range(5)]
    writes = []
    original = head.rt.db.write

    @contextmanager
    def counting_write():
        writes.append(1)
        with original() as session:
            yield session

    monkeypatch.setattr(head.rt.db, "write", counting_write)
    assert head.cycle().placed == 5
    monkeypatch.setattr(head.rt.db, "write", original)
    assert len(writes) == 3, "five placements, two a transaction"
    assert sorted(t["job_id"] for t in agent.tasks()) == sorted(jobs)
    assert {head.job(j)["reason"] for j in jobs} == {"starting on n1"}


def test_claims_added_in_a_transaction_are_released_in_it_too(head):
    head.register("n1", gpus=2)
    job = head.submit({"command": "a", "resources": {"gpus": 1}})["id"]
    head.cycle()
    with head.rt.write() as session:
        [task] = session.scalars(select(TaskRow).where(TaskRow.job_id == job))
        other = 1 - task.gpus[0]
        add_claims(session, [GpuClaimRow(node="n1", gpu_index=other, fraction=1.0, job_id=job, task_id=task.id)])
        release(session, task, TaskState.EXITED, head.clock.now(), 0, "")
    with head.rt.read() as session:
        assert list(session.scalars(select(GpuClaimRow))) == []


def test_a_heartbeat_waiting_behind_a_long_write_is_not_silence(head, clock):
    """A node whose heartbeat reached the head, and waits for the write lock behind a long transaction,
    is not declared lost by a liveness check that waited there too, however long the wait."""
    agent = head.register("n1", gpus=0)
    head.register("n2", gpus=0)
    rt, queue = head.rt, head.rt.db._write_lock._waiters
    hold, holding = threading.Event(), threading.Event()

    def long_write():
        with rt.write():
            holding.set()
            hold.wait(10)

    threads = [threading.Thread(target=long_write)]
    threads[0].start()
    holding.wait(10)
    clock.advance(8)
    beat = HeartbeatRequest(tasks=[], applied_version=agent.applied + 1)  # news: handled in full
    threads.append(threading.Thread(target=agent_service.heartbeat, args=(rt, "n1", agent.token, beat)))
    threads[1].start()
    _wait_until(lambda: len(queue) == 1)
    clock.advance(4)  # the last heartbeat written is 12 s old, the one waiting 4 s
    rt.quiet.heard("n2", clock.now())  # another node's quiet heartbeat: the check writes its time first
    threads.append(threading.Thread(target=check_nodes, args=(rt,)))
    threads[2].start()
    _wait_until(lambda: len(queue) == 2)
    clock.advance(20)  # the long transaction goes on
    hold.set()
    for thread in threads:
        thread.join(10)
    assert [n["state"] for n in head.nodes().values()] == ["READY", "READY"]
