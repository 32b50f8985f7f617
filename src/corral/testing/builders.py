"""Fluent builders for scheduler scenarios: ``make_node("n1").gpus(8, "H100").build()``.

Builders are immutable: every call returns a new builder, so a partly built value can be
shared between test cases safely.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from corral.model import (
    FULL_GPU,
    Allocation,
    FairShare,
    Gpu,
    Job,
    LiveAllocation,
    Node,
    NodeState,
    Quotas,
    Request,
    RunningJob,
)
from corral.sched import Snapshot
from corral.spec.quantities import parse_memory_mb


@dataclass(frozen=True)
class NodeBuilder:
    """Builds a ``Node``; READY with no GPUs, CPUs or memory until told otherwise."""

    name: str
    _gpus: tuple[Gpu, ...] = ()
    _cpus: float = 0.0
    _memory_mb: int = 0
    _labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    _state: NodeState = NodeState.READY
    _container_runtime: str = ""

    def gpus(self, count: int, gpu_type: str = "H100", memory: str | int = "80GB") -> NodeBuilder:
        """Add ``count`` GPUs of one type; indices continue after the GPUs already added."""
        start = len(self._gpus)
        added = tuple(Gpu(index=start + i, type=gpu_type, memory_mb=parse_memory_mb(memory)) for i in range(count))
        return replace(self, _gpus=self._gpus + added)

    def cpus(self, count: float) -> NodeBuilder:
        return replace(self, _cpus=float(count))

    def memory(self, size: str | int) -> NodeBuilder:
        return replace(self, _memory_mb=parse_memory_mb(size))

    def labels(self, **labels: str) -> NodeBuilder:
        return replace(self, _labels=MappingProxyType({**self._labels, **labels}))

    def state(self, state: NodeState) -> NodeBuilder:
        return replace(self, _state=state)

    def runtime(self, name: str = "podman") -> NodeBuilder:
        """The node's agent runs jobs with an image through this container runtime."""
        return replace(self, _container_runtime=name)

    def build(self) -> Node:
        return Node(
            self.name, self._state, self._gpus, self._cpus, self._memory_mb, dict(self._labels), self._container_runtime
        )


@dataclass(frozen=True)
class JobBuilder:
    """Builds a pending ``Job``; one node, no GPUs, priority 0 and seq 0 until told otherwise."""

    id: str
    _request: Request = field(default_factory=Request)
    _priority: int = 0
    _seq: int = 0
    _submitted_at: datetime | None = None
    _user: str = ""
    _team: str = ""
    _time_limit_s: float | None = None
    _preemptible: bool = False

    def gpus(self, per_node: float) -> JobBuilder:
        return self._with(gpus_per_node=float(per_node))

    def nodes(self, count: int) -> JobBuilder:
        return self._with(nodes=count)

    def types(self, *gpu_types: str) -> JobBuilder:
        """Acceptable GPU types, preferred first; none means any type."""
        return self._with(gpu_types=gpu_types)

    def cpus(self, per_node: float) -> JobBuilder:
        return self._with(cpus_per_node=float(per_node))

    def memory(self, per_node: str | int) -> JobBuilder:
        return self._with(memory_mb_per_node=parse_memory_mb(per_node))

    def priority(self, priority: int) -> JobBuilder:
        return replace(self, _priority=priority)

    def seq(self, seq: int) -> JobBuilder:
        return replace(self, _seq=seq)

    def submitted_at(self, when: datetime) -> JobBuilder:
        return replace(self, _submitted_at=when)

    def user(self, user: str) -> JobBuilder:
        return replace(self, _user=user)

    def team(self, team: str) -> JobBuilder:
        return replace(self, _team=team)

    def time_limit(self, seconds: float) -> JobBuilder:
        return replace(self, _time_limit_s=float(seconds))

    def topology(self, label: str | None, required: bool = False) -> JobBuilder:
        """Pack a gang by this node label (``required``: all in one domain); None: ignore topology."""
        return replace(self, _request=replace(self._request, topology=label, topology_required=required))

    def container(self) -> JobBuilder:
        """The job runs in a container image: only nodes with a container runtime take it."""
        return replace(self, _request=replace(self._request, container=True))

    def preemptible(self, preemptible: bool = True) -> JobBuilder:
        return replace(self, _preemptible=preemptible)

    def build(self) -> Job:
        return Job(
            id=self.id,
            seq=self._seq,
            request=self._request,
            priority=self._priority,
            submitted_at=self._submitted_at,
            user=self._user,
            team=self._team,
            time_limit_s=self._time_limit_s,
            preemptible=self._preemptible,
        )

    def _with(
        self,
        *,
        nodes: int | None = None,
        gpus_per_node: float | None = None,
        gpu_types: tuple[str, ...] | None = None,
        cpus_per_node: float | None = None,
        memory_mb_per_node: int | None = None,
    ) -> JobBuilder:
        r = self._request
        request = replace(
            r,
            nodes=r.nodes if nodes is None else nodes,
            gpus_per_node=r.gpus_per_node if gpus_per_node is None else gpus_per_node,
            gpu_types=r.gpu_types if gpu_types is None else gpu_types,
            cpus_per_node=r.cpus_per_node if cpus_per_node is None else cpus_per_node,
            memory_mb_per_node=r.memory_mb_per_node if memory_mb_per_node is None else memory_mb_per_node,
        )
        return replace(self, _request=request)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def make_job(job_id: str) -> JobBuilder:
    return JobBuilder(job_id)


def live_alloc(
    job_id: str,
    node: str,
    gpus: Iterable[int] = (),
    fraction: float = FULL_GPU,
    cpus: float = 0.0,
    memory: str | int = 0,
) -> LiveAllocation:
    """Resources a running (or stopping) job holds on one node."""
    allocation = Allocation(node, tuple(gpus), fraction, float(cpus), parse_memory_mb(memory))
    return LiveAllocation(job_id, allocation)


def running_job(
    job_id: str,
    now: datetime,
    *,
    ran_s: float = 0.0,
    priority: int = 0,
    preemptible: bool = False,
    time_limit_s: float | None = None,
    checkpoint_s_ago: float | None = None,
    stopping: bool = False,
    team: str = "",
    user: str = "",
) -> RunningJob:
    """A running job that started ``ran_s`` seconds before ``now``; its allocations are separate ``live_alloc``s."""
    started = now - timedelta(seconds=ran_s)
    checkpoint = None if checkpoint_s_ago is None else now - timedelta(seconds=checkpoint_s_ago)
    return RunningJob(
        id=job_id,
        started_at=started,
        priority=priority,
        preemptible=preemptible,
        time_limit_s=time_limit_s,
        last_checkpoint_at=checkpoint,
        stopping=stopping,
        team=team,
        user=user,
    )


def snapshot(
    nodes: Iterable[Node | NodeBuilder] = (),
    pending: Iterable[Job | JobBuilder] = (),
    live: Iterable[LiveAllocation] = (),
    running: Iterable[RunningJob] = (),
    quotas: Quotas | None = None,
    fair_share: FairShare | None = None,
    team_parents: Mapping[str, str] | None = None,
) -> Snapshot:
    """A ``Snapshot`` from built values or builders."""
    return Snapshot(
        nodes=tuple(n.build() if isinstance(n, NodeBuilder) else n for n in nodes),
        live=tuple(live),
        pending=tuple(j.build() if isinstance(j, JobBuilder) else j for j in pending),
        running=tuple(running),
        quotas=quotas or {},
        fair_share=fair_share,
        team_parents=team_parents or {},
    )
