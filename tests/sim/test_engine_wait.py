"""A job's wait counts the time it is queued again after a preemption."""

from __future__ import annotations

from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, prepare, simulate
from corral.spec import ClusterSpec, NodeGroupSpec


def test_time_queued_after_a_preemption_counts_as_wait() -> None:
    # One GPU. "long" (100,000 s) starts at 0 and is demoted past 2 GPU-hours, at 7,200 s; "short" comes at
    # 8,000 s and preempts it, runs 1,000 s; "long" starts again at 9,000 s: it waited 1,000 s in all.
    cluster = ClusterSpec(node_groups=[NodeGroupSpec(name="g", count=1, gpus_per_node=1, gpu_type="V100")])
    nodes = build_nodes(cluster)
    trace = Trace(
        jobs=(
            TraceJob(id="long", submit_s=0.0, duration_s=100_000.0, gpus=1),
            TraceJob(id="short", submit_s=8_000.0, duration_s=1_000.0, gpus=1),
        )
    )
    result = simulate(prepare(trace, nodes), nodes, get_policy("default"))
    records = {r.id: r for r in result.records}
    assert records["long"].preemptions == 1
    assert (records["long"].start_s, records["long"].wait_s) == (0.0, 1_000.0)
    assert (records["short"].start_s, records["short"].wait_s) == (8_000.0, 0.0)
    assert records["long"].finish_s == 101_000.0
