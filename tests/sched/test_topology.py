"""Topology-aware gangs: the fewest racks (or blocks) that hold a gang, one rack when required."""

from __future__ import annotations

from datetime import UTC, datetime

from corral.sched import get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFAULT = get_policy("default")


def racks(**sizes):
    """``racks(r1=2, r2=4)``: that many 8-GPU nodes in each rack, named r1-0, r1-1, ..."""
    return [make_node(f"{rack}-{i}").gpus(8).labels(rack=rack) for rack, n in sizes.items() for i in range(n)]


def placed_racks(plan):
    [placement] = plan.placements
    return sorted({a.node.split("-")[0] for a in placement.allocations})


def test_a_gang_goes_to_the_smallest_rack_that_holds_it_whole():
    cluster = racks(r1=2, r2=4, r3=3)
    assert placed_racks(schedule(snapshot(cluster, pending=[make_job("g").gpus(8).nodes(3)]), DEFAULT, NOW)) == ["r3"]
    assert placed_racks(schedule(snapshot(cluster, pending=[make_job("g").gpus(8).nodes(4)]), DEFAULT, NOW)) == ["r2"]
    assert placed_racks(schedule(snapshot(cluster, pending=[make_job("g").gpus(8).nodes(2)]), DEFAULT, NOW)) == ["r1"]


def test_a_gang_no_rack_holds_spans_the_fewest_racks():
    cluster = racks(r1=2, r2=4, r3=3)
    plan = schedule(snapshot(cluster, pending=[make_job("g").gpus(8).nodes(6)]), DEFAULT, NOW)
    assert placed_racks(plan) == ["r2", "r3"]


def test_a_required_rack_makes_the_gang_wait_rather_than_span():
    cluster = racks(r1=2, r2=4)
    job = make_job("g").gpus(8).nodes(5).topology("rack", required=True)
    plan = schedule(snapshot(cluster, pending=[job]), DEFAULT, NOW)
    assert plan.placements == ()
    fits = make_job("g").gpus(8).nodes(4).topology("rack", required=True)
    assert placed_racks(schedule(snapshot(cluster, pending=[fits]), DEFAULT, NOW)) == ["r2"]


def test_nodes_without_the_label_are_their_own_domains():
    cluster = [make_node(f"n{i}").gpus(8) for i in range(3)]
    packed = schedule(snapshot(cluster, pending=[make_job("g").gpus(8).nodes(2)]), DEFAULT, NOW)
    assert len(packed.placements) == 1
    required = make_job("g").gpus(8).nodes(2).topology("rack", required=True)
    assert schedule(snapshot(cluster, pending=[required]), DEFAULT, NOW).placements == ()


def test_gangs_pack_by_any_label_such_as_a_block():
    cluster = [make_node(f"n{i}").gpus(8).labels(block="b0" if i < 3 else "b1") for i in range(5)]
    plan = schedule(snapshot(cluster, pending=[make_job("g").gpus(8).nodes(2).topology("block")]), DEFAULT, NOW)
    [placement] = plan.placements
    assert {a.node for a in placement.allocations} <= {"n3", "n4"}  # b1: the smallest block that holds it


def test_a_required_rack_gang_is_told_about_the_rack():
    cluster = racks(r1=2, r2=3)
    busy = [live_alloc("busy", "r2-0", range(8))]
    waiting = make_job("g").gpus(8).nodes(3).topology("rack", required=True)
    plan = schedule(snapshot(cluster, pending=[waiting], live=busy, running=[running_job("busy", NOW)]), DEFAULT, NOW)
    assert plan.placements == ()  # 4 nodes are free, but no rack has 3 of them
    reason = plan.reasons["g"]
    assert reason.code == "RESOURCES"
    assert "all in one rack (the most one rack has now is 2)" in reason.message


def test_a_required_rack_gang_no_rack_can_hold_never_fits():
    job = make_job("g").gpus(8).nodes(4).topology("rack", required=True)
    reason = schedule(snapshot(racks(r1=2, r2=3), pending=[job]), DEFAULT, NOW).reasons["g"]
    assert reason.code == "NEVER_FITS"
    assert "all in one rack (topology.required); the most one rack has is 3" in reason.message
    spanning = make_job("g").gpus(8).nodes(4).topology("rack")
    assert schedule(snapshot(racks(r1=2, r2=3), pending=[spanning]), DEFAULT, NOW).placements
