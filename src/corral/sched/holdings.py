"""Live allocations grouped by job, and the GPUs each running job holds, brought up to date from one
snapshot to the next.

Grouping 20,000 running jobs' allocations, and working out which GPU type and how many GPUs each one
holds, costs a cycle tens of milliseconds from scratch; from one snapshot to the next only the jobs on
nodes whose allocations changed need it again. As in ``carry``, these are memos: what comes back equals
what a computation from scratch gives (the tests compare them), so a plan never depends on which
snapshots came before. Sums are exactly rounded (``math.fsum``) and keyed in sorted order, so they do
not depend on the order jobs were added in either.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from corral.model import Allocation, LiveAllocation
from corral.sched import carry

if TYPE_CHECKING:
    from corral.sched.snapshot import Snapshot

_CHANGED_AT_MOST = 0.5  # past this share of nodes changed, grouping from scratch is as cheap
_EMPTY: Mapping[str, float] = MappingProxyType({})

TeamType = tuple[str, str]  # (team, GPU type)


@dataclass(frozen=True)
class Holdings:
    """What each running job holds of the GPUs: ``holding`` (team, GPU type, GPUs) for every running job
    with GPUs on the snapshot's nodes, and ``used``, the GPUs each team's own jobs use of each type
    (read-only)."""

    holding: Mapping[str, tuple[str, str, float]]
    used: Mapping[TeamType, float]
    members: Mapping[TeamType, Mapping[str, float]] = field(default_factory=dict)  # ``holding`` by team and type


@dataclass
class _Grouping:
    live: frozenset[LiveAllocation] | None  # what it was computed from, when each allocation was listed once
    held: dict[str, tuple[Allocation, ...]]
    view: Mapping[str, tuple[Allocation, ...]]  # ``held``, read-only
    parent: Mapping[str, tuple[Allocation, ...]] | None = None  # the grouping's view it was brought up from
    changed: frozenset[str] = frozenset()  # with ``parent``: the jobs whose allocations may differ from it


@dataclass
class _Kept:
    grouped: Mapping[str, tuple[Allocation, ...]]  # the grouping's view these were computed from
    layout: carry.GpuLayout
    teams: dict[str, str]  # running job → team
    gpus: dict[str, tuple[str, float]]  # job → (GPU type, GPUs) it holds; CPU-only jobs left out
    members: dict[TeamType, dict[str, float]]  # (team, GPU type) → its running jobs' GPUs
    holdings: Holdings = field(repr=False)


_lock = threading.RLock()
_groupings: list[_Grouping] = []  # the last one
_kept: list[_Kept] = []  # the last one


def grouped_by_job(snapshot: Snapshot) -> Mapping[str, tuple[Allocation, ...]]:
    """The snapshot's live allocations grouped by job, each job's sorted by node, then GPUs and the rest
    (read-only). A job whose allocations are the same values as in the last call gets the same tuple back."""
    with _lock:
        last = _groupings[0] if _groupings else None
        grouping = None if last is None else _brought_up(last, snapshot)
        if grouping is None:
            held: dict[str, tuple[Allocation, ...]] = {}
            by_node = snapshot.live_by_node
            for name in sorted(by_node):
                for job_id, single in carry.singles_on_node(name, by_node[name]):
                    known = held.get(job_id)
                    held[job_id] = single if known is None else known + single
            live = snapshot.live_set
            grouping = _Grouping(live if len(live) == len(snapshot.live) else None, held, MappingProxyType(held))
        _groupings[:] = [grouping]
        return grouping.view


def _brought_up(last: _Grouping, snapshot: Snapshot) -> _Grouping | None:
    """The last grouping brought up to date with the snapshot; None when too much changed, or the same
    allocation is listed twice (in either)."""
    live = snapshot.live_set
    if last.live is None or len(live) != len(snapshot.live):
        return None
    if last.live is live:
        return last
    gone, new = last.live - live, live - last.live
    if len(gone) + len(new) > _CHANGED_AT_MOST * max(1, len(live)):
        return None
    dropped: dict[str, set[Allocation]] = {}
    added: dict[str, list[Allocation]] = {}
    for allocation in gone:
        dropped.setdefault(allocation.job_id, set()).add(allocation.allocation)
    for allocation in new:
        added.setdefault(allocation.job_id, []).append(allocation.allocation)
    jobs = frozenset(dropped.keys() | added.keys())
    held = dict(last.held)
    for job_id in jobs:
        out = dropped.get(job_id, ())
        current = [a for a in held.pop(job_id, ()) if a not in out] + added.get(job_id, [])
        if current:  # distinct values: their order does not depend on the snapshot's
            held[job_id] = tuple(sorted(current, key=carry.allocation_order))
    return _Grouping(live, held, MappingProxyType(held), last.view, jobs)


def team_holdings(snapshot: Snapshot) -> Holdings:
    """``Holdings`` of the snapshot's running jobs, brought up to date from the last call's where the
    nodes are the same and the allocations were grouped from the last call's."""
    layout = carry.gpu_layout(snapshot.nodes)
    grouped = snapshot.allocations_of()
    teams = {r.id: r.team for r in snapshot.running}
    with _lock:
        last = _kept[0] if _kept else None
        changed = None if last is None or last.layout is not layout else _changed_since(last.grouped, grouped)
        if last is None or changed is None:
            kept = _from_scratch(grouped, layout, teams)
        else:
            changed |= {job_id for job_id, _ in teams.items() ^ last.teams.items()}
            kept = _updated(last, grouped, layout, teams, changed)
        _kept[:] = [kept]
        return kept.holdings


def _changed_since(
    before: Mapping[str, tuple[Allocation, ...]], grouped: Mapping[str, tuple[Allocation, ...]]
) -> set[str] | None:
    """The jobs whose allocations may differ between two groupings, when the second was brought up from the first."""
    if grouped is before:
        return set()
    last = _groupings[0] if _groupings else None
    if last is None or last.view is not grouped or last.parent is not before:
        return None
    return set(last.changed)


def _from_scratch(
    grouped: Mapping[str, tuple[Allocation, ...]], layout: carry.GpuLayout, teams: dict[str, str]
) -> _Kept:
    type_at = layout[0]
    gpus: dict[str, tuple[str, float]] = {}
    for job_id, allocations in grouped.items():
        held = _gpus_held(allocations, type_at)
        if held is not None:
            gpus[job_id] = held
    holding: dict[str, tuple[str, str, float]] = {}
    members: dict[TeamType, dict[str, float]] = {}
    for job_id, (gpu_type, count) in gpus.items():
        team = teams.get(job_id)
        if team is not None:
            holding[job_id] = (team, gpu_type, count)
            members.setdefault((team, gpu_type), {})[job_id] = count
    used = {key: math.fsum(jobs.values()) for key, jobs in sorted(members.items())}
    holdings = Holdings(MappingProxyType(holding), MappingProxyType(used), MappingProxyType(members))
    return _Kept(grouped, layout, teams, gpus, members, holdings)


def _updated(
    last: _Kept,
    grouped: Mapping[str, tuple[Allocation, ...]],
    layout: carry.GpuLayout,
    teams: dict[str, str],
    changed: Iterable[str],
) -> _Kept:
    type_at = layout[0]
    gpus, holding, members = dict(last.gpus), dict(last.holdings.holding), dict(last.members)
    copied: set[TeamType] = set()  # the members changed here: copies, never the last call's

    def own(key: TeamType) -> dict[str, float]:
        if key not in copied:
            copied.add(key)
            members[key] = dict(members.get(key, _EMPTY))
        return members[key]

    for job_id in changed:
        allocations = grouped.get(job_id)
        held = None if allocations is None else _gpus_held(allocations, type_at)
        if held is None:
            gpus.pop(job_id, None)
        else:
            gpus[job_id] = held
        was = holding.pop(job_id, None)
        if was is not None:
            del own((was[0], was[1]))[job_id]
        team = teams.get(job_id)
        if team is not None and held is not None:
            holding[job_id] = (team, held[0], held[1])
            own((team, held[0]))[job_id] = held[1]
    used = dict(last.holdings.used)
    for key in copied:
        if members[key]:
            used[key] = math.fsum(members[key].values())
        else:
            del members[key]
            used.pop(key, None)
    if any(key not in last.holdings.used for key in copied):
        used = dict(sorted(used.items()))
    holdings = Holdings(MappingProxyType(holding), MappingProxyType(used), MappingProxyType(members))
    return _Kept(grouped, layout, teams, gpus, members, holdings)


def _gpus_held(allocations: Sequence[Allocation], type_at: Mapping[str, Mapping[int, str]]) -> tuple[str, float] | None:
    """(GPU type, GPUs) the job holds, the type of the first of its GPUs on a known node; None when it holds none."""
    gpus = sum(len(a.gpus) * a.gpu_fraction for a in allocations)
    if gpus <= 0:
        return None
    for a in allocations:
        types = type_at.get(a.node)
        if types is not None:
            for i in a.gpus:
                if (t := types.get(i)) is not None:
                    return t, gpus
    return None
