"""The snapshot's live allocations are the same objects from one cycle to the next while a task holds the same."""

from types import SimpleNamespace

from corral.head.livecache import LiveAllocations
from corral.head.services.scheduling import load_snapshot
from corral.model import Allocation, LiveAllocation


def task(job_id="j-1", generation=1, node="n1", gpus=(0, 1), fraction=1.0, cpus=2.0, memory_mb=1024):
    return SimpleNamespace(
        job_id=job_id,
        generation=generation,
        node=node,
        gpus=list(gpus),
        gpu_fraction=fraction,
        cpus=cpus,
        memory_mb=memory_mb,
    )


def test_a_task_holding_the_same_keeps_its_object_and_a_changed_one_gets_a_new_one():
    cache = LiveAllocations()
    first = cache.of([task(), task(job_id="j-2", gpus=(2,))])
    assert first == (
        LiveAllocation("j-1", Allocation("n1", (0, 1), 1.0, 2.0, 1024)),
        LiveAllocation("j-2", Allocation("n1", (2,), 1.0, 2.0, 1024)),
    )
    again = cache.of([task(), task(job_id="j-2", gpus=(2,))])
    assert again[0] is first[0] and again[1] is first[1]
    moved = cache.of([task(generation=2), task(job_id="j-2", gpus=(3,))])  # a new attempt; other GPUs
    assert moved[0] is not first[0] and moved[1] is not first[1]
    assert moved[1] == LiveAllocation("j-2", Allocation("n1", (3,), 1.0, 2.0, 1024))
    assert cache.of([]) == () and cache.of([task()])[0] is not first[0]  # forgotten once gone


def test_two_snapshots_of_a_head_share_their_live_allocations(head):
    head.register("n1", gpus=2)
    head.submit({"command": "x", "resources": {"gpus": 1}})
    head.submit({"command": "y", "resources": {"gpus": 1}})
    head.cycle()
    first, _ = load_snapshot(head.rt)
    second, _ = load_snapshot(head.rt)
    assert len(first.live) == 2
    assert all(a is b for a, b in zip(first.live, second.live, strict=True))
