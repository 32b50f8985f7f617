"""Fragmentation: free GPUs that cannot serve the largest pending request."""

from __future__ import annotations

from datetime import UTC, datetime

from corral.sched import fragmentation, get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFAULT = get_policy("default")


def test_free_gpus_on_nodes_too_full_for_the_largest_request_are_fragmented():
    nodes = [make_node(f"n{i}").gpus(8) for i in range(3)]
    live = [live_alloc("a", "n0", range(6)), live_alloc("b", "n1", range(3))]
    pending = [make_job("big").gpus(8).seq(0), make_job("bigger").gpus(8).seq(1), make_job("small").gpus(1).seq(2)]
    snap = snapshot(nodes, live=live, pending=pending)
    plan = schedule(snap, DEFAULT, NOW)
    # n2 takes "big"; "bigger" waits for 8; "small" best-fits n0; n0 has 1 and n1 5 free, both < 8
    assert fragmentation(snap, plan, DEFAULT) == {"H100": 6.0}


def test_nothing_is_fragmented_when_nothing_waits():
    snap = snapshot([make_node("n0").gpus(8)], live=[live_alloc("a", "n0", range(6))])
    assert fragmentation(snap, schedule(snap, DEFAULT, NOW), DEFAULT) == {"H100": 0.0}
