"""Where a job's victim search could stop fewer jobs for a share of it, kept up to date between cycles.

For a level and a request shape (GPU types, GPUs per node), each node that could hold a share of
such a job (one node's part of it) gets the fewest running jobs below the level (in
``ClusterState``'s index) that must stop for that, the largest first, or 0 where the share fits what
is free now. A node without such jobs is left out, even one with room: the cycle passes enough nodes
of each free count, so it placed the job elsewhere or took that room, and nothing frees it. Counting
that for every node costs a pass over every running job; under sustained overload the victim rounds
(``corral.sim.victims``) ask for it several times a cycle, so each table is built once and then only
the nodes where a job started, stopped or changed level since are counted again.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from corral.model import Job

if TYPE_CHECKING:
    from corral.sim.state import ClusterState

_Key = tuple[int, tuple[str, ...], int]  # level, GPU types, GPUs per node


TABLES = 64
"""Tables kept (the latest used): a policy whose levels change with every job's service (``srpt-oracle``)
asks for many levels, each a few times."""


class _Table:
    """One level and shape: each node's count, and ``(count, node)`` sorted, fewest first, then by name."""

    __slots__ = ("counts", "hosts", "order", "seen")

    def __init__(self, hosts: frozenset[str]) -> None:
        self.hosts = hosts  # the nodes of a type the request accepts, with GPUs enough for a share
        self.seen = -1  # the state's changes counted in (``ClusterState.changed_since``)
        self.counts: dict[str, int] = {}
        self.order: list[tuple[int, str]] = []


class NodeNeeds:
    """Per level and request shape, the nodes where a share could be made to fit, and at what count."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._tables: dict[_Key, _Table] = {}

    def fewer(self, job: Job, passed: set[str], count: int, node: str, limit: int) -> list[tuple[int, str]]:
        """At most ``limit`` of ``(jobs to stop, node)`` for the nodes not in ``passed`` that could hold the
        job's share by stopping fewer than ``count`` jobs, or as many and named before ``node`` (with
        ``count`` 0: at all), fewest first, then by name."""
        order = self._table(job).order
        out: list[tuple[int, str]] = []
        for entry in order:
            if count and entry >= (count, node):
                break
            if entry[1] in passed:
                continue
            out.append(entry)
            if len(out) >= limit:
                break
        return out

    def hosts(self, job: Job, enough: int, skip: set[str], stopping: int | None, stopped: Collection[str] = ()) -> int:
        """How many nodes (up to ``enough``) outside ``skip`` could hold a share of the job once at most
        ``stopping`` (None: any number of) running jobs below its level, or of ``stopped`` (whatever their
        level), are gone: those with the room now, and those where that many would have to stop."""
        table, state = self._table(job), self._state
        slots, found = job.request.gpu_slots_per_node, 0
        if stopped:  # the nodes they run on are counted one by one; the kept counts do not know them
            touched = {name for v in stopped for name in state.running_nodes.get(v, ())} - skip
            found = self._hosts_among(job, table.hosts, enough, sorted(touched), stopping, stopped)
            if found >= enough:
                return found
            skip = skip | touched
        for (_, free), names in state.buckets.items():
            if free >= slots:
                for name in names:
                    if name in table.hosts and name not in skip:
                        found += 1
                        if found >= enough:
                            return found
        order = table.order
        end = len(order) if stopping is None else bisect_left(order, (stopping + 1, ""))
        for at in range(bisect_left(order, (1, "")), end):
            if order[at][1] not in skip:
                found += 1
                if found >= enough:
                    return found
        return found

    def _hosts_among(
        self,
        job: Job,
        hosts: frozenset[str],
        enough: int,
        names: Sequence[str],
        stopping: int | None,
        stopped: Collection[str],
    ) -> int:
        """``hosts``, counted from the jobs running on each of ``names`` now."""
        state, slots, level = self._state, job.request.gpu_slots_per_node, self._state.policy.level(job)
        below, found = state.running_level, 0
        for name in names:
            if name not in hosts:
                continue
            room = state.free[name]
            if room < slots:
                live = state.live[name].items()
                sizes = [len(a.allocation.gpus) for j, a in live if below[j] < level or j in stopped]
                if stopping is not None and len(sizes) > stopping:
                    sizes = sorted(sizes, reverse=True)[:stopping]
                room += sum(sizes)
            if room >= slots:
                found += 1
                if found >= enough:
                    return found
        return found

    def _table(self, job: Job) -> _Table:
        state, request = self._state, job.request
        level, slots = state.policy.level(job), request.gpu_slots_per_node
        key = (level, request.gpu_types, slots)
        tables = self._tables
        table = tables.pop(key, None)
        if table is None:
            hosts = frozenset(name for t in request.gpu_types or state.types for name in state.hosts(t, slots))
            table = _Table(hosts)
            if len(tables) >= TABLES:
                del tables[next(iter(tables))]  # the least recently used
        tables[key] = table
        changed, table.seen = state.changed_since(table.seen)
        hosts = table.hosts
        counts, order = table.counts, table.order
        for name in hosts if changed is None or len(changed) > len(hosts) else changed & hosts:
            old = counts.pop(name, None)
            if old is not None:
                del order[bisect_left(order, (old, name))]
            new = self._count(name, level, slots)
            if new is not None:
                counts[name] = new
                insort(order, (new, name))
        return table

    def _count(self, name: str, level: int, slots: int) -> int | None:
        state = self._state
        below = state.running_level
        sizes = [len(live.allocation.gpus) for j, live in state.live[name].items() if below[j] < level]
        if not sizes:
            return None
        room = state.free[name]
        if room >= slots:  # the cycle took room there: the victims may be needed, at least none
            return 0
        if room + sum(sizes) < slots:
            return None
        needs = 0
        for size in sorted(sizes, reverse=True):
            room += size
            needs += 1
            if room >= slots:
                break
        return needs
