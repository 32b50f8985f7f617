"""Scheduling policies, chosen by name: the order jobs are tried in and how nodes are ranked."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from corral.model import Job, RunningJob
from corral.sched.las import TIRESIAS_THRESHOLDS, tiresias_level, tiresias_order
from corral.sched.node_capacity import NodeCapacity, NodeRanker, Rank, shared
from corral.sched.oracle import srpt_level, srpt_order
from corral.sched.service_rank import THRESHOLDS, default_level, default_order


def by_priority(job: Job | RunningJob) -> int:
    """The preemption level of a job: its priority."""
    return job.priority


@dataclass(frozen=True)
class Policy:
    """The knobs of one scheduling policy.

    ``job_order`` sorts pending jobs (lowest first; the job id breaks ties); it reads the job
    alone, so a job keeps its place from one cycle to the next (``order``), and gives every job a
    tuple of the same length. The rankers
    order candidate nodes (lowest first; the node name breaks ties) from the node's own
    free capacity, for GPU jobs and for CPU-only jobs. ``backfill`` reserves resources for
    the highest-priority blocked job (EASY backfill); ``preemption`` stops lower-priority,
    preemptible running jobs when that lets a blocked job start now.

    ``level`` says who may preempt whom: a job only preempts running jobs of a lower
    level. ``thresholds`` are the attained GPU-seconds at which a job's level or order
    changes (the caller re-plans when a running job crosses one). With ``strict_order`` jobs start
    only in queue order: the first that cannot start holds back every later one. A ``simulation_only``
    policy reads data only the simulator has (traced durations); the head refuses it.
    """

    name: str
    description: str
    job_order: Callable[[Job], tuple[int, ...]]
    gpu_ranker: NodeRanker
    cpu_ranker: NodeRanker
    backfill: bool = False
    preemption: bool = False
    level: Callable[[Job | RunningJob], int] = by_priority
    thresholds: tuple[float, ...] = ()
    simulation_only: bool = False
    fair_share: bool = False  # within a priority, teams and users that used less go first
    strict_order: bool = False  # the first job that cannot start holds back every later one (no skipping)


def priority_then_submit(job: Job) -> tuple[int, ...]:
    return (-job.priority, job.seq)


def submit_order(job: Job) -> tuple[int, ...]:
    return (job.seq,)


def fewest_empty_gpus(node: NodeCapacity) -> Rank:
    """Best fit: the node left with the fewest empty GPUs after placement."""
    return shared((node.free_gpus,))


def gpu_free_first(node: NodeCapacity) -> Rank:
    """For CPU-only work: nodes without GPUs, then the node with the fewest empty GPUs."""
    return shared((1 if node.node.gpus else 0, node.free_gpus))


def by_name(node: NodeCapacity) -> Rank:
    """First fit: nodes in name order."""
    return ()


DEFAULT = Policy(
    name="default",
    description=(
        "priority (highest first); within a priority, jobs past 2 GPU-hours of service last, then by the"
        " size their user's or team's finished jobs had, then submit order; best-fit packing; EASY backfill;"
        " preemption of lower priorities, demoted jobs and larger size classes"
    ),
    job_order=default_order,
    gpu_ranker=fewest_empty_gpus,
    cpu_ranker=gpu_free_first,
    backfill=True,
    preemption=True,
    level=default_level,
    thresholds=THRESHOLDS,
    fair_share=True,
)

FIFO = Policy(
    name="fifo",
    description=(
        "submit order only, strictly: the first job that cannot start holds back every later one; first"
        " fit by node name; no reservation and no preemption (the baseline to compare against)"
    ),
    job_order=submit_order,
    gpu_ranker=by_name,
    cpu_ranker=by_name,
    strict_order=True,
)

PRIORITY = Policy(
    name="priority",
    description="priority (highest first), then submit order; best-fit packing; no reservation, no preemption",
    job_order=priority_then_submit,
    gpu_ranker=fewest_empty_gpus,
    cpu_ranker=gpu_free_first,
)

TIRESIAS = Policy(
    name="tiresias",
    description=(
        "Tiresias-style discretised least attained GPU-time: three queues split at 3,250 and 7,200"
        " GPU-seconds received, FIFO within a queue, demotion as service grows, higher queues preempt lower ones"
    ),
    job_order=tiresias_order,
    gpu_ranker=fewest_empty_gpus,
    cpu_ranker=gpu_free_first,
    preemption=True,
    level=tiresias_level,
    thresholds=TIRESIAS_THRESHOLDS,
)

SRPT_ORACLE = Policy(
    name="srpt-oracle",
    description=(
        "clairvoyant shortest remaining GPU-time first, preemptive: reads traced durations, so it runs"
        " only in the simulator, as a bound for the others"
    ),
    job_order=srpt_order,
    gpu_ranker=fewest_empty_gpus,
    cpu_ranker=gpu_free_first,
    preemption=True,
    level=srpt_level,
    simulation_only=True,
)

POLICIES: Mapping[str, Policy] = MappingProxyType({p.name: p for p in (DEFAULT, FIFO, PRIORITY, TIRESIAS, SRPT_ORACLE)})


def get_policy(name: str) -> Policy:
    """The registered policy called ``name``; ``ValueError`` names the valid ones otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        valid = ", ".join(sorted(POLICIES))
        raise ValueError(f"unknown scheduling policy {name!r}; valid policies: {valid}") from None
