"""``why``: each node's verdict for one job, grouped by the check that rejected it."""

from __future__ import annotations

from corral.model import NodeState
from corral.sched import get_policy, why
from corral.testing import live_alloc, make_job, make_node, snapshot


def verdicts(job, snap):
    return [(g.filter, g.message, g.nodes) for g in why(job, snap, get_policy("default"))]


def test_each_node_gets_the_first_check_it_fails():
    nodes = [
        make_node("down").gpus(8, "H100").state(NodeState.NOT_READY).build(),
        make_node("drained").gpus(8, "H100").state(NodeState.DRAINED).build(),
        make_node("a100").gpus(8, "A100").build(),
        make_node("small").gpus(2, "H100").build(),
        make_node("busy").gpus(8, "H100").build(),
        make_node("free").gpus(8, "H100").build(),
    ]
    job = make_job("j").gpus(4).types("H100").build()
    snap = snapshot(nodes, live=[live_alloc("other", "busy", [0, 1, 2, 3, 4, 5])], pending=[job])
    assert verdicts(job, snap) == [
        ("state", "node is DRAINED", ("drained",)),
        ("state", "node is NOT_READY", ("down",)),
        ("gpu_type", "has no H100 GPUs (has 8 A100)", ("a100",)),
        ("capacity", "needs 4 GPUs per node; it has 2 H100", ("small",)),
        ("free", "needs 4 free H100 GPUs; 2 free now", ("busy",)),
        ("fits", "fits now", ("free",)),
    ]


def test_nodes_with_the_same_verdict_are_grouped_and_host_resources_are_checked():
    nodes = [make_node(f"n{i}").gpus(8, "H100").cpus(32).memory("256GB").build() for i in range(3)]
    job = make_job("j").gpus(1).cpus(64).build()
    assert verdicts(job, snapshot(nodes, pending=[job])) == [
        ("capacity", "needs 64 CPUs; it has 32", ("n0", "n1", "n2")),
    ]


def test_fractional_requests_report_the_largest_share_left():
    nodes = [make_node("n1").gpus(1, "H100").build()]
    job = make_job("j").gpus(0.5).build()
    snap = snapshot(nodes, live=[live_alloc("a", "n1", [0], fraction=0.75)], pending=[job])
    assert verdicts(job, snap) == [("free", "needs 0.5 of one GPU; the most left on one is 0.25", ("n1",))]


def test_one_gpu_is_said_in_the_singular():
    nodes = [make_node("none").gpus(0, "H100").build(), make_node("busy").gpus(2, "H100").build()]
    job = make_job("j").gpus(1).build()
    snap = snapshot(nodes, live=[live_alloc("other", "busy", [0, 1])], pending=[job])
    messages = [message for _, message, _ in verdicts(job, snap)]
    assert "needs 1 free GPU; 0 free now" in messages


def test_free_gpus_are_counted_and_named_for_the_types_asked_for():
    nodes = [make_node("mixed").gpus(2, "H100").gpus(2, "A100").build()]
    job = make_job("j").gpus(1).types("A100").build()
    snap = snapshot(nodes, live=[live_alloc("other", "mixed", [2, 3])], pending=[job])
    assert verdicts(job, snap) == [("free", "needs 1 free A100 GPU; 0 free now", ("mixed",))]


def test_a_gang_that_must_be_in_one_rack_fits_no_node_of_a_rack_with_too_few_free_nodes():
    nodes = [
        make_node("a1").gpus(8, "H100").labels(rack="r1").build(),
        make_node("a2").gpus(8, "H100").labels(rack="r1").build(),
        make_node("b1").gpus(8, "H100").labels(rack="r2").build(),
        make_node("b2").gpus(8, "H100").labels(rack="r2").build(),
        make_node("c1").gpus(8, "H100").build(),
    ]
    job = make_job("j").gpus(4).nodes(2).topology("rack", required=True).build()
    snap = snapshot(nodes, live=[live_alloc("other", "a2", [0, 1, 2, 3, 4, 5])], pending=[job])
    assert verdicts(job, snap) == [
        ("free", "needs 4 free GPUs; 2 free now", ("a2",)),
        ("topology", "fits now, but only 1 node of rack r1 fit; the job needs 2 in one rack", ("a1",)),
        ("topology", "has no rack label; the job needs all 2 nodes in one rack", ("c1",)),
        ("fits", "fits now", ("b1", "b2")),
    ]
