"""The jobs to simulate: requests for traced jobs, and the ones that can never fit the cluster."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from corral.model import Job, Node, Request, interned
from corral.sched.feasibility import ClusterShapes
from corral.sim.trace import Trace, TraceJob

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
"""Virtual time zero: the trace's time origin."""

NEVER_FITS = "never fits this cluster"


@dataclass(frozen=True, slots=True)
class SimJob:
    """A traced job and the scheduler's view of it."""

    trace: TraceJob
    job: Job


@dataclass(frozen=True)
class Workload:
    """The jobs to simulate on one cluster, and the trace rows left out, by reason."""

    jobs: tuple[SimJob, ...]
    skipped: Mapping[str, int]

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def gang_request(job: TraceJob, max_per_node: int, gpu_types: tuple[str, ...] | None = None) -> Request:
    """A request for the job: one node, or the fewest nodes of ``max_per_node`` GPUs that hold it;
    ``gpu_types`` in place of the job's own (spelled as the cluster spells them). A fraction below one
    GPU is a fractional request: it shares a GPU with other fractions, as on the head."""
    types = job.gpu_types if gpu_types is None else gpu_types
    if 0 < job.gpus < 1:
        return interned(Request(nodes=1, gpus_per_node=float(job.gpus), gpu_types=types))
    nodes = max(1, math.ceil(job.gpus / max_per_node)) if max_per_node > 0 else 1
    return interned(Request(nodes=nodes, gpus_per_node=float(math.ceil(job.gpus / nodes)), gpu_types=types))


def fitting_request(job: TraceJob, largest: int, gpu_types: tuple[str, ...], shapes: ClusterShapes) -> Request | None:
    """The fewest nodes that can ever hold the job, its GPUs split evenly: on nodes of the ``largest``
    number of GPUs its types have, else spread over more nodes with fewer GPUs each (12 GPUs on one
    8-GPU and two 4-GPU nodes: 3 × 4); None when no such gang fits ``shapes``."""
    request = gang_request(job, largest, gpu_types)
    if shapes.never_fits(request) is None:
        return request
    for share in range(int(request.gpus_per_node) - 1, 0, -1) if request.nodes > 1 else ():
        nodes = math.ceil(job.gpus / share)
        thinner = interned(Request(nodes=nodes, gpus_per_node=float(math.ceil(job.gpus / nodes)), gpu_types=gpu_types))
        if thinner.gpus_per_node == share and shapes.never_fits(thinner) is None:
            return thinner
    return None


def cluster_spelling(gpu_types: Sequence[str], known: Collection[str]) -> tuple[str, ...]:
    """The trace's GPU types as the cluster spells them: an exact match, else one that differs only
    in case (``v100`` → ``V100``); a type the cluster does not have stays as it is."""
    by_lower: dict[str, str] = {}
    for name in known:
        by_lower.setdefault(name.lower(), name)
    return tuple(dict.fromkeys(t if t in known else by_lower.get(t.lower(), t) for t in gpu_types))


def prepare(trace: Trace, nodes: Sequence[Node]) -> Workload:
    """Requests for every traced job; jobs that can never fit the cluster are skipped and counted."""
    most: dict[str, int] = {}
    for node in nodes:
        for gpu_type in node.gpu_types():
            most[gpu_type] = max(most.get(gpu_type, 0), node.count_of_type(gpu_type))
    shapes = ClusterShapes(nodes)
    fitting: dict[tuple[float, tuple[str, ...]], Request | None] = {}  # by GPUs and types asked for
    skipped = Counter(trace.skipped)
    jobs: list[SimJob] = []
    for seq, item in enumerate(trace.jobs):
        asked = cluster_spelling(item.gpu_types, most)
        if (item.gpus, asked) not in fitting:
            types = [t for t in asked if t in most] if asked else list(most)
            largest = max((most[t] for t in types), default=0)
            fitting[item.gpus, asked] = fitting_request(item, largest, asked, shapes) if nodes else None
        request = fitting[item.gpus, asked]
        if request is None:
            skipped[NEVER_FITS] += 1
            continue
        submitted = EPOCH + timedelta(seconds=item.submit_s)
        job = Job(
            id=item.id,
            seq=seq,
            request=request,
            submitted_at=submitted,
            user=item.user,
            team=item.vc,
            time_limit_s=item.time_limit_s,
        )
        jobs.append(SimJob(item, job))
    if len({j.job.id for j in jobs}) != len(jobs):
        raise ValueError("the trace repeats a job_id; every job_id must be unique")
    return Workload(jobs=tuple(jobs), skipped=dict(sorted(skipped.items())))
