"""Scheduling policies, chosen by name: the order jobs are tried in and how nodes are ranked."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from corral.model import Job
from corral.sched.snapshot import NodeCapacity, NodeRanker, Rank


@dataclass(frozen=True)
class Policy:
    """The knobs of one scheduling policy.

    ``job_order`` sorts pending jobs (lowest first; the job id breaks ties). The rankers
    order candidate nodes (lowest first; the node name breaks ties) from the node's own
    free capacity, for GPU jobs and for CPU-only jobs. ``backfill`` reserves resources for
    the highest-priority blocked job (EASY backfill); ``preemption`` stops lower-priority,
    preemptible running jobs when that lets a blocked job start now.
    """

    name: str
    description: str
    job_order: Callable[[Job], tuple[int, ...]]
    gpu_ranker: NodeRanker
    cpu_ranker: NodeRanker
    backfill: bool = False
    preemption: bool = False


def priority_then_submit(job: Job) -> tuple[int, ...]:
    return (-job.priority, job.seq)


def submit_order(job: Job) -> tuple[int, ...]:
    return (job.seq,)


def fewest_empty_gpus(node: NodeCapacity) -> Rank:
    """Best fit: the node left with the fewest empty GPUs after placement."""
    return (node.free_gpus,)


def gpu_free_first(node: NodeCapacity) -> Rank:
    """For CPU-only work: nodes without GPUs, then the node with the fewest empty GPUs."""
    return (1 if node.node.gpus else 0, node.free_gpus)


def by_name(node: NodeCapacity) -> Rank:
    """First fit: nodes in name order."""
    return ()


DEFAULT = Policy(
    name="default",
    description="priority (highest first), then submit order; best-fit packing; EASY backfill; preemption",
    job_order=priority_then_submit,
    gpu_ranker=fewest_empty_gpus,
    cpu_ranker=gpu_free_first,
    backfill=True,
    preemption=True,
)

FIFO = Policy(
    name="fifo",
    description=(
        "submit order only; first fit by node name; a job that does not fit is skipped, with no"
        " reservation and no preemption (the baseline to compare against)"
    ),
    job_order=submit_order,
    gpu_ranker=by_name,
    cpu_ranker=by_name,
)

POLICIES: Mapping[str, Policy] = MappingProxyType({p.name: p for p in (DEFAULT, FIFO)})


def get_policy(name: str) -> Policy:
    """The registered policy called ``name``; ``ValueError`` names the valid ones otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        valid = ", ".join(sorted(POLICIES))
        raise ValueError(f"unknown scheduling policy {name!r}; valid policies: {valid}") from None
