"""A scheduling cycle leaves no reference cycles behind: what it allocates is freed as soon as it is dropped,
so the collector's pass after a cycle (paused during it) finds nothing to collect."""

from __future__ import annotations

import gc
from datetime import UTC, datetime

from corral.sched import get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
HOUR = 3600.0


def test_a_cycle_with_victim_searches_over_victims_of_different_costs_leaves_no_garbage() -> None:
    nodes = [make_node(f"n{i}").gpus(8) for i in range(4)]
    live, running = [], []
    for i in range(4):  # each node: four 2-GPU jobs that ran for different times (their costs differ)
        for k in range(4):
            job = f"r{i}{k}"
            live.append(live_alloc(job, f"n{i}", range(2 * k, 2 * k + 2)))
            running.append(running_job(job, NOW, ran_s=(1 + i + 3 * k) * HOUR, preemptible=True))
    pending = [make_job(f"p{j}").gpus(g).priority(5) for j, g in enumerate((8, 6, 4, 2, 8))]
    snap = snapshot(nodes=nodes, live=live, running=running, pending=pending)
    gc.collect()
    gc.disable()
    try:
        plan = schedule(snap, get_policy("default"), NOW)
        assert plan.preemptions  # the searches ran, over subsets of victims of different costs
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable is kept in ``gc.garbage``
        gc.collect()
        left = [o for o in gc.garbage if _of_the_scheduler(o)]  # (another thread's garbage is not ours)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


def _of_the_scheduler(thing: object) -> bool:
    module = getattr(thing, "__module__", None) if callable(thing) else type(thing).__module__
    return isinstance(module, str) and module.startswith("corral.sched")
