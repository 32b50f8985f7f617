"""Discrete-event replay on a virtual clock: arrivals and finishes, one ``schedule()`` per event time.

The engine calls ``corral.sched.schedule`` unchanged and applies each Plan's placements to
its in-memory cluster. By default each cycle's Snapshot holds only what can matter to the
cycle (see ``_Cluster.snapshot``); ``prune=False`` passes every node, allocation and pending
job, as the head does, and gives the same placements.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from corral.model import Job, LiveAllocation, Node, Request
from corral.sched import Placement, Policy, Snapshot, never_fits, schedule
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


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What happened to one job in a simulation."""

    id: str
    submit_s: float
    start_s: float
    finish_s: float
    gpus: int
    gpu_type: str
    nodes: tuple[str, ...]

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.submit_s

    @property
    def wait_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * (self.finish_s - self.start_s)


@dataclass(frozen=True)
class SimResult:
    """One policy's run over a workload."""

    policy: str
    records: tuple[JobRecord, ...]  # in finish order
    total_gpus: int
    cycles: int
    preemptions: int = 0
    unfinished: int = 0


def gang_request(job: TraceJob, max_per_node: int) -> Request:
    """A request for the job: one node, or the fewest nodes of ``max_per_node`` GPUs that hold it."""
    nodes = max(1, math.ceil(job.gpus / max_per_node)) if max_per_node > 0 else 1
    return Request(nodes=nodes, gpus_per_node=float(math.ceil(job.gpus / nodes)), gpu_types=job.gpu_types)


def prepare(trace: Trace, nodes: Sequence[Node]) -> Workload:
    """Requests for every traced job; jobs that can never fit the cluster are skipped and counted."""
    most: dict[str, int] = {}
    for node in nodes:
        for gpu_type in node.gpu_types():
            most[gpu_type] = max(most.get(gpu_type, 0), node.count_of_type(gpu_type))
    problems: dict[Request, str | None] = {}
    skipped = Counter(trace.skipped)
    jobs: list[SimJob] = []
    for seq, item in enumerate(trace.jobs):
        types = [t for t in item.gpu_types if t in most] if item.gpu_types else list(most)
        request = gang_request(item, max((most[t] for t in types), default=0))
        if request not in problems:
            problems[request] = never_fits(request, nodes) if nodes else "no nodes"
        if problems[request] is not None:
            skipped[NEVER_FITS] += 1
            continue
        submitted = EPOCH + timedelta(seconds=item.submit_s)
        job = Job(id=item.id, seq=seq, request=request, submitted_at=submitted, user=item.user, team=item.vc)
        jobs.append(SimJob(item, job))
    if len({j.job.id for j in jobs}) != len(jobs):
        raise ValueError("the trace repeats a job_id; every job_id must be unique")
    return Workload(jobs=tuple(jobs), skipped=dict(sorted(skipped.items())))


def simulate(
    workload: Workload,
    nodes: Sequence[Node],
    policy: Policy,
    speed: Mapping[str, float] | None = None,
    *,
    prune: bool = True,
) -> SimResult:
    """Replay the workload: a job runs for its traced duration divided by its GPU type's speed."""
    cluster = _Cluster(nodes, policy, prune)
    speeds = dict(speed or {})
    arrivals = workload.jobs
    finishes: list[tuple[float, int, str]] = []
    started: dict[str, tuple[SimJob, Placement, float]] = {}
    by_id = {j.job.id: j for j in arrivals}
    records: list[JobRecord] = []
    cycles = 0
    i, n = 0, len(arrivals)
    while i < n or finishes:
        now = min(arrivals[i].trace.submit_s if i < n else math.inf, finishes[0][0] if finishes else math.inf)
        while finishes and finishes[0][0] <= now:
            finish_s, _, job_id = heapq.heappop(finishes)
            item, placement, start_s = started.pop(job_id)
            cluster.release(placement)
            records.append(_record(item, placement, start_s, finish_s))
        while i < n and arrivals[i].trace.submit_s <= now:
            cluster.add(arrivals[i].job)
            i += 1
        snapshot = cluster.snapshot()
        if snapshot is None:
            continue
        cycles += 1
        plan = schedule(snapshot, policy, EPOCH + timedelta(seconds=now))
        for placement in plan.placements:
            item = by_id[placement.job_id]
            cluster.start(item.job, placement)
            run_s = item.trace.duration_s / speeds.get(placement.gpu_type or "", 1.0)
            started[item.job.id] = (item, placement, now)
            heapq.heappush(finishes, (now + run_s, item.job.seq, item.job.id))
    return SimResult(
        policy=policy.name,
        records=tuple(records),
        total_gpus=sum(len(node.gpus) for node in nodes),
        cycles=cycles,
        unfinished=cluster.pending_count,
    )


def _record(item: SimJob, placement: Placement, start_s: float, finish_s: float) -> JobRecord:
    return JobRecord(
        id=item.job.id,
        submit_s=item.trace.submit_s,
        start_s=start_s,
        finish_s=finish_s,
        gpus=sum(len(a.gpus) for a in placement.allocations),
        gpu_type=placement.gpu_type or "",
        nodes=tuple(a.node for a in placement.allocations),
    )


_QueueEntry = tuple[tuple[int, ...], str, Job]


class _Cluster:
    """Free GPUs, live allocations and pending jobs, indexed to build small snapshots fast.

    Nodes are bucketed by shape (their GPUs) and free-GPU count, names sorted. Rankers see
    only a node's own free capacity, so nodes in one bucket rank equally and the scheduler
    takes them in name order: when the cycle's jobs need at most N nodes in all, the first
    N of each bucket are all it can pick. Pending jobs are grouped by request, in policy
    order; a group passes only as many jobs as its free GPUs could take.
    """

    def __init__(self, nodes: Sequence[Node], policy: Policy, prune: bool) -> None:
        self.prune = prune
        self.policy = policy
        self.nodes = {n.name: n for n in sorted(nodes, key=lambda n: n.name)}
        self.live: dict[str, dict[str, LiveAllocation]] = {name: {} for name in self.nodes}
        self.free = {name: len(n.gpus) for name, n in self.nodes.items()}
        shapes: dict[tuple[object, ...], int] = {}
        self.shape = {
            name: shapes.setdefault((n.gpus, n.cpus, n.memory_mb), len(shapes)) for name, n in self.nodes.items()
        }
        self.buckets: dict[tuple[int, int], list[str]] = {}
        for name, free in self.free.items():
            self.buckets.setdefault((self.shape[name], free), []).append(name)
        self.node_type = {name: n.gpus[0].type for name, n in self.nodes.items() if n.gpus}
        if any(len(n.gpu_types()) > 1 for n in self.nodes.values()):
            raise ValueError("the simulator needs one GPU type per node")
        self.types = tuple(sorted(set(self.node_type.values())))
        self.queues: dict[Request, list[_QueueEntry]] = {}
        self.keys: dict[str, _QueueEntry] = {}
        self.pending_count = 0

    def add(self, job: Job) -> None:
        entry = (self.policy.job_order(job), job.id, job)
        insort(self.queues.setdefault(job.request, []), entry, key=_entry_key)
        self.keys[job.id] = entry
        self.pending_count += 1

    def start(self, job: Job, placement: Placement) -> None:
        entry = self.keys.pop(job.id)
        queue = self.queues[job.request]
        del queue[bisect_left(queue, _entry_key(entry), key=_entry_key)]
        self.pending_count -= 1
        for alloc in placement.allocations:
            self.live[alloc.node][job.id] = LiveAllocation(job.id, alloc)
            self._move(alloc.node, -len(alloc.gpus))

    def release(self, placement: Placement) -> None:
        for alloc in placement.allocations:
            del self.live[alloc.node][placement.job_id]
            self._move(alloc.node, len(alloc.gpus))

    def _move(self, name: str, change: int) -> None:
        shape, free = self.shape[name], self.free[name]
        bucket = self.buckets[(shape, free)]
        del bucket[bisect_left(bucket, name)]
        self.free[name] = free + change
        insort(self.buckets.setdefault((shape, free + change), []), name)

    def snapshot(self) -> Snapshot | None:
        """The next cycle's input, or None when no pending job could be placed now."""
        if not self.pending_count:
            return None
        if not self.prune:
            pending = tuple(e[2] for q in self.queues.values() for e in q)
            live = tuple(a for by_job in self.live.values() for a in by_job.values())
            return Snapshot(nodes=tuple(self.nodes.values()), live=live, pending=pending)
        slots = self._slots()
        jobs: list[Job] = []
        for request, queue in self.queues.items():
            if queue and (room := self._room(request, slots)):
                jobs.extend(e[2] for e in queue[:room])
        if not jobs:
            return None
        wanted = sum(j.request.nodes for j in jobs)
        names = sorted(n for (_, free), names in self.buckets.items() if free > 0 for n in names[:wanted])
        nodes = tuple(self.nodes[n] for n in names)
        live = tuple(a for n in names for a in self.live[n].values())
        return Snapshot(nodes=nodes, live=live, pending=tuple(jobs))

    def _slots(self) -> dict[str, Counter[int]]:
        """Per GPU type: how many nodes have each count of free GPUs."""
        slots: dict[str, Counter[int]] = {t: Counter() for t in self.types}
        for (_, free), names in self.buckets.items():
            if free > 0 and names:
                slots[self.node_type[names[0]]][free] += len(names)
        return slots

    def _room(self, request: Request, slots: Mapping[str, Counter[int]]) -> int:
        """At most how many jobs with this request the free GPUs could take now."""
        per_node = math.ceil(request.gpus_per_node)
        room = 0
        for gpu_type in request.gpu_types or self.types:
            counts = slots.get(gpu_type)
            if not counts:
                continue
            gpus = sum(free * nodes for free, nodes in counts.items())
            places = sum((free // per_node) * nodes for free, nodes in counts.items())
            room += min(gpus // (per_node * request.nodes), places // request.nodes)
        return room


def _entry_key(entry: _QueueEntry) -> tuple[tuple[int, ...], str]:
    return entry[0], entry[1]
