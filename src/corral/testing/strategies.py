"""Hypothesis strategies for nodes, jobs, live allocations and whole scheduler snapshots.

Sizes stay small on purpose: invariants break on small clusters just as well, and the
property tests stay fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import strategies as st

from corral.model import FULL_GPU, Allocation, Gpu, Job, LiveAllocation, Node, NodeState, Request, RunningJob
from corral.sched import Snapshot

GPU_TYPES = ("A100", "H100", "L4")
FRACTIONS = (0.25, 0.3, 0.5, 0.75)
_GPU_MEMORY_MB = {"A100": 40 * 1024, "H100": 80 * 1024, "L4": 24 * 1024}

# Strategies are built once here: hypothesis draws are the cost of these tests, not the scheduler.
_states = st.sampled_from([NodeState.READY] * 3 + [NodeState.NOT_READY, NodeState.DRAINED])
_inventories = st.sampled_from(
    [(), (("H100", 8),), (("H100", 4),), (("A100", 8),), (("A100", 2),), (("L4", 1),), (("H100", 2), ("L4", 4))]
    + [((t, n),) for t in GPU_TYPES for n in (1, 3, 8)]
)
_node_cpus = st.sampled_from([0.0, 8.0, 16.0, 64.0])
_node_memory = st.sampled_from([0, 16 * 1024, 256 * 1024])
_job_nodes = st.sampled_from([1, 1, 1, 2, 3])
_job_gpus = st.sampled_from([0.0, *FRACTIONS, 1.0, 2.0, 4.0, 8.0])
_job_types = st.sampled_from(
    [(), (), ("H100",), ("A100",), ("L4",), ("A100", "H100"), ("H100", "L4", "A100"), ("B200",), ("B200", "L4")]
)
_job_cpus = st.none() | st.sampled_from([1.0, 4.0, 16.0, 48.0])
_job_memory = st.none() | st.sampled_from([1024, 32 * 1024, 128 * 1024])
_priorities = st.integers(0, 3)


@st.composite
def nodes(draw: st.DrawFn, name: str = "n0") -> Node:
    """A node with one or two GPU types (or none), mostly READY."""
    state = draw(_states)
    types = [gpu_type for gpu_type, count in draw(_inventories) for _ in range(count)]
    gpus = [Gpu(index, gpu_type, _GPU_MEMORY_MB[gpu_type]) for index, gpu_type in enumerate(types)]
    return Node(name, state, tuple(gpus), draw(_node_cpus), draw(_node_memory))


@st.composite
def node_lists(draw: st.DrawFn, max_size: int = 6) -> list[Node]:
    """Nodes named n0, n1, ...; possibly none."""
    count = draw(st.integers(0, max_size))
    return [draw(nodes(f"n{i}")) for i in range(count)]


@st.composite
def requests(draw: st.DrawFn) -> Request:
    """Whole, fractional and CPU-only requests; sometimes gangs, sometimes for an unknown GPU type."""
    return Request(
        nodes=draw(_job_nodes),
        gpus_per_node=draw(_job_gpus),
        gpu_types=draw(_job_types),
        cpus_per_node=draw(_job_cpus),
        memory_mb_per_node=draw(_job_memory),
    )


@st.composite
def jobs(draw: st.DrawFn, job_id: str = "j0", seq: int = 0) -> Job:
    return Job(id=job_id, seq=seq, request=draw(requests()), priority=draw(_priorities))


@st.composite
def job_lists(draw: st.DrawFn, max_size: int = 10) -> list[Job]:
    """Jobs j0, j1, ... with distinct submit numbers in a drawn order."""
    count = draw(st.integers(0, max_size))
    seqs = draw(st.permutations(range(count)))
    return [draw(jobs(f"j{i}", seq)) for i, seq in enumerate(seqs)]


# How one GPU is held: free, whole, or shared by fractions that sum to at most 1.
_gpu_uses = st.sampled_from([(), (), (FULL_GPU,), (0.5,), (0.75,), (0.25, 0.5), (0.3, 0.3, 0.3)])
_host_shares = st.sampled_from([0.0, 0.25, 0.5, 1.0])


@st.composite
def live_allocations(draw: st.DrawFn, node_list: Sequence[Node]) -> list[LiveAllocation]:
    """Allocations within the nodes' capacity: GPUs held whole or shared, plus some CPUs and memory."""
    held: list[LiveAllocation] = []
    for node in node_list:
        uses = [draw(_gpu_uses) for _ in node.gpus]
        for gpu, fractions in zip(node.gpus, uses, strict=True):
            held.extend(
                LiveAllocation(f"live{len(held) + k}", Allocation(node.name, (gpu.index,), fraction))
                for k, fraction in enumerate(fractions)
            )
        share = draw(_host_shares)  # of the node's CPUs and memory
        if share:
            allocation = Allocation(node.name, (), FULL_GPU, node.cpus * share, int(node.memory_mb * share))
            held.append(LiveAllocation(f"live{len(held)}", allocation))
    return held


@st.composite
def snapshots(draw: st.DrawFn, max_nodes: int = 6, max_jobs: int = 10) -> Snapshot:
    """A consistent snapshot: nodes, live allocations within their capacity, and pending jobs."""
    node_list = draw(node_lists(max_nodes))
    live = draw(live_allocations(node_list))
    return Snapshot(nodes=tuple(node_list), live=tuple(live), pending=tuple(draw(job_lists(max_jobs))))


_limits = st.none() | st.sampled_from([600.0, 1800.0, 3600.0, 7200.0])
_ran = st.sampled_from([0.0, 300.0, 1800.0, 3600.0, 10800.0])


@st.composite
def running_snapshots(draw: st.DrawFn, now: datetime, max_nodes: int = 5, max_jobs: int = 8) -> Snapshot:
    """A snapshot whose live allocations belong to running jobs with priorities, time limits and checkpoints.

    Pending jobs get time limits and priorities too, so backfill and preemption both have work.
    """
    base = draw(snapshots(max_nodes, max_jobs))
    running: list[RunningJob] = []
    for job_id in sorted({live.job_id for live in base.live}):
        if draw(st.integers(0, 9)) == 0:
            continue  # held by a job the scheduler knows nothing about
        ran = draw(_ran)
        checkpoint = draw(st.none() | st.sampled_from([0.0, 60.0, 600.0]))
        running.append(
            RunningJob(
                id=job_id,
                started_at=now - timedelta(seconds=ran),
                priority=draw(_priorities),
                preemptible=draw(st.booleans()),
                time_limit_s=draw(_limits),
                last_checkpoint_at=None if checkpoint is None else now - timedelta(seconds=min(ran, checkpoint)),
                stopping=draw(st.integers(0, 9)) == 0,
            )
        )
    pending = tuple(replace(job, time_limit_s=draw(_limits)) for job in base.pending)
    return Snapshot(nodes=base.nodes, live=base.live, pending=pending, running=tuple(running))
