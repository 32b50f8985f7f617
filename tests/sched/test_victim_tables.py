"""The victim search's tables equal what their definitions give, computed the plain way."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

from corral.model import LiveAllocation, RunningJob
from corral.sched.policy import by_priority
from corral.sched.victim_scan import Cost, lost_gpu_seconds
from corral.sched.victim_tables import VictimTables
from corral.testing import live_alloc, make_node, running_job, snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_victims_by_node_and_the_scan_order_equal_a_plain_computation() -> None:
    """Through jobs on one node and gangs over several, several victims per node (listed in no order of
    their ids), jobs stopping, jobs that may be victims only as their team borrows, and checkpoints."""
    rng = random.Random(7)
    for _ in range(30):
        nodes = [make_node(f"n{i}").gpus(8) for i in range(6)]
        live: list[LiveAllocation] = []
        running: list[RunningJob] = []
        for k in rng.sample(range(40), 25):
            job_id = f"r{k:02d}"
            hosts = rng.sample(range(6), rng.choice((1, 1, 1, 2, 3)))
            live += [live_alloc(job_id, f"n{h}", [rng.randrange(8)], rng.choice((1.0, 0.5))) for h in hosts]
            ran = rng.choice((0.0, 60.0, 3600.0))
            checkpoint = rng.choice((None, 30.0, ran + 10))
            running.append(
                running_job(
                    job_id,
                    NOW,
                    ran_s=ran,
                    priority=rng.randrange(3),
                    preemptible=rng.random() < 0.5,
                    checkpoint_s_ago=checkpoint,
                    stopping=rng.random() < 0.15,
                )
            )
        snap = snapshot(nodes=nodes, live=live, running=running)
        held = snap.allocations_of()
        borrowers = frozenset(r.id for r in running if rng.random() < 0.3)
        tables = VictimTables.of(snap, held, NOW, by_priority, borrowers)

        victims = {r.id: r for r in running if r.preemptible or r.stopping or r.id in borrowers}
        assert tables.jobs == victims
        cost: dict[str, Cost] = {
            v: (0.0, 0) if r.stopping else (lost_gpu_seconds(r, held[v], NOW), 1) for v, r in victims.items()
        }
        assert tables.cost == cost
        on_node = {
            name: sorted(v for v in victims if any(a.node == name for a in held[v]))
            for name in {a.node for v in victims for a in held[v]}
        }
        assert tables.on_node == on_node
        assert tables.scan._by_cost == sorted((min(cost[v] for v in on), name) for name, on in on_node.items())
        assert tables.scan._lowest_on == {
            name: min((victims[v].priority for v in on if victims[v].preemptible), default=math.inf)
            for name, on in on_node.items()
        }
        assert all(tables.levels[v] == r.priority for v, r in victims.items())  # asked or worked out when read
        assert tables.lowest == min(
            (r.priority for r in victims.values() if r.preemptible and not r.stopping), default=None
        )
        assert tables.scan._stopping_on == {
            name for name, on in on_node.items() if any(victims[v].stopping for v in on)
        }
