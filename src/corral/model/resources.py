"""Nodes, GPUs, resource requests and allocations as frozen values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from corral.model.states import JobState, NodeState

FULL_GPU = 1.0
EPSILON = 1e-9


@dataclass(frozen=True)
class Gpu:
    index: int
    type: str
    memory_mb: int


@dataclass(frozen=True)
class Node:
    name: str
    state: NodeState
    gpus: tuple[Gpu, ...]
    cpus: float = 0.0
    memory_mb: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    container_runtime: str = ""  # empty: the agent runs no container images

    def gpu_types(self) -> set[str]:
        return {g.type for g in self.gpus}

    def count_of_type(self, gpu_type: str) -> int:
        return sum(1 for g in self.gpus if g.type == gpu_type)


@dataclass(frozen=True)
class Request:
    """What a job needs: ``nodes`` × (GPUs, CPUs, memory) of one acceptable GPU type."""

    nodes: int = 1
    gpus_per_node: float = 0.0
    gpu_types: tuple[str, ...] = ()  # acceptable types, preferred first; empty = any
    cpus_per_node: float | None = None
    memory_mb_per_node: int | None = None
    # A gang's nodes share this node label's value (e.g. "rack") where they can: the fewest
    # domains that fit it; with ``topology_required`` all of them must.
    topology: str | None = "rack"
    topology_required: bool = False
    container: bool = False  # runs in a container image: only on nodes with a container runtime

    def _fields(self) -> tuple[object, ...]:
        return (
            self.nodes,
            self.gpus_per_node,
            self.gpu_types,
            self.cpus_per_node,
            self.memory_mb_per_node,
            self.topology,
            self.topology_required,
            self.container,
        )

    def __hash__(self) -> int:
        # Computed once: the scheduler looks requests up in sets many times per job and cycle.
        try:
            return self._hash  # type: ignore[attr-defined,no-any-return]
        except AttributeError:
            cached = hash(self._fields())
            object.__setattr__(self, "_hash", cached)
            return cached

    @property
    def fractional(self) -> bool:
        return 0 < self.gpus_per_node < 1

    @property
    def gpu_slots_per_node(self) -> int:
        return math.ceil(self.gpus_per_node)

    @property
    def total_gpus(self) -> float:
        return self.nodes * self.gpus_per_node


_INTERNED: dict[Request, Request] = {}
_INTERNED_AT_MOST = 65_536  # distinct requests kept; a cluster has far fewer (they repeat across jobs)


def interned(request: Request) -> Request:
    """The one object kept for requests equal to ``request`` (``request`` itself the first time).

    The scheduler looks requests up in dicts and sets many times per cycle; equal requests that are
    one object compare by identity, without comparing their fields."""
    found = _INTERNED.get(request)
    if found is not None:
        return found
    if len(_INTERNED) >= _INTERNED_AT_MOST:
        _INTERNED.clear()
    _INTERNED[request] = request
    return request


@dataclass(frozen=True, slots=True)
class Allocation:
    """The share of one node given to one task of a job."""

    node: str
    gpus: tuple[int, ...] = ()
    gpu_fraction: float = FULL_GPU  # of each listed GPU; below 1 only for fractional jobs
    cpus: float = 0.0
    memory_mb: int = 0


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the scheduler sees it."""

    id: str
    seq: int  # submit order
    request: Request
    priority: int = 0
    submitted_at: datetime | None = None
    state: JobState = JobState.PENDING
    user: str = ""
    team: str = ""
    time_limit_s: float | None = None  # wall-clock limit; None = runs until it ends
    preemptible: bool = False  # once running, may be stopped for a higher-priority job
    attained_gpu_s: float = 0.0  # GPU-seconds of service already received (earlier runs); filled by the caller
    expected_gpu_s: float | None = None  # GPU-seconds jobs like it took (finished jobs), None = unknown
    oracle_gpu_s: float | None = None  # remaining GPU-seconds, known only to the simulator (clairvoyant bound)


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding resources now, as backfill and preemption see it.

    Its allocations are the ``LiveAllocation`` values with its id. ``stopping`` marks a job
    already told to stop (preempted or cancelled): its resources come back soon at no cost.
    """

    id: str
    started_at: datetime
    priority: int = 0
    preemptible: bool = False
    time_limit_s: float | None = None
    last_checkpoint_at: datetime | None = None
    stopping: bool = False
    user: str = ""
    team: str = ""
    attained_gpu_s: float = 0.0  # GPU-seconds of service received, this run up to now included
    expected_gpu_s: float | None = None  # as on ``Job``
    oracle_gpu_s: float | None = None  # remaining GPU-seconds; simulator only

    @property
    def expected_end(self) -> datetime | None:
        """When its time limit runs out; None without a limit."""
        if self.time_limit_s is None:
            return None
        return self.started_at + timedelta(seconds=self.time_limit_s)

    def unsaved_s(self, now: datetime) -> float:
        """Seconds of work since its last checkpoint (or its start): what stopping it now loses."""
        checkpoint = self.last_checkpoint_at
        since = self.started_at if checkpoint is None or checkpoint < self.started_at else checkpoint
        return 0.0 if since >= now else (now - since).total_seconds()


@dataclass(frozen=True, slots=True)
class LiveAllocation:
    """Resources held on a node by a job whose processes may still exist."""

    job_id: str
    allocation: Allocation
    # Computed on first use, then kept: the scheduler puts every snapshot's allocations in a set, and most of
    # them are the same objects from one snapshot to the next. 0: not computed yet.
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __hash__(self) -> int:
        found = self._hash
        if found == 0:
            found = hash((self.job_id, self.allocation))
            object.__setattr__(self, "_hash", found)
        return found

    def __reduce__(self) -> tuple[type[LiveAllocation], tuple[str, Allocation]]:
        # A string's hash differs between processes: a copy elsewhere computes its own.
        return (LiveAllocation, (self.job_id, self.allocation))
