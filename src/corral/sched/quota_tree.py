"""Quotas along the team tree, per GPU type: what each level is guaranteed, keeps, pools and uses.

The organisation is the root; a team's ``nominal`` covers its whole subtree (its own jobs and its
child teams'), and a team with no quota for a GPU type is transparent for it: its nominal is its
children's sum, with no limits of its own. The arithmetic is that of hierarchical cohorts:

- a level **keeps** what its lending limit holds back: ``kept = max(0, pooled - lending_limit)``
  (nothing without a lending limit);
- a level **pools** its unassigned nominal (``nominal`` less its children's nominals) and what each
  child does not keep; the organisation pools every GPU of the type that no top-level team owns;
- a level's **pool use** is its own jobs' GPUs plus what each child uses beyond what it keeps.

A team takes more GPUs first from what it keeps and is not using, then from its parent, level by
level up to the organisation; a level with a borrowing limit lets at most ``pooled - kept +
borrowing_limit`` of its pool use rest on its parent. With every team directly under the
organisation this is the flat rule: a team borrows from unowned GPUs and others' lendable unused
nominal. When every level's nominal holds its children's (the config requires it), a level's
subtree usage never exceeds its nominal by more than its pool use exceeds its pool, so these
checks also bound ``usage <= nominal + borrowing_limit`` at every level.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from corral.model import EPSILON, Quotas


class TeamTree:
    """Each team's parent; a team not listed, or whose parent chain loops, sits under the organisation."""

    def __init__(self, parents: Mapping[str, str]) -> None:
        self._parents = dict(parents)
        self._chains: dict[str, tuple[str, ...]] = {}
        self.flat = not self._parents

    def chain(self, team: str) -> tuple[str, ...]:
        """The team and its ancestors, nearest first, without the organisation."""
        found = self._chains.get(team)
        if found is None:
            chain, parent = [team], self._parents.get(team)
            while parent is not None and parent not in chain:
                chain.append(parent)
                parent = self._parents.get(parent)
            if parent is not None:  # a loop: the teams on it hang from the organisation
                chain = chain[: chain.index(parent) + 1]
            found = self._chains[team] = tuple(chain)
        return found

    def names(self) -> set[str]:
        return set(self._parents) | set(self._parents.values())

    def meeting(self, team: str, other: str) -> tuple[int, str]:
        """Where ``other``'s branch meets ``team``'s: (depth of their lowest common level, 0 for the
        organisation; ``other``'s team or ancestor just below that level, or ``other`` itself when
        it is ``team`` or one of its ancestors)."""
        mine = self.chain(team)
        theirs = self.chain(other)
        for index, level in enumerate(theirs):
            if level in mine:
                return len(theirs) - index, theirs[max(0, index - 1)]
        return 0, theirs[-1]

    def under(self, team: str, ancestor: str) -> bool:
        """Whether ``team`` is ``ancestor`` or in its subtree."""
        return ancestor in self.chain(team)


@dataclass(frozen=True)
class Block:
    """Why more GPUs do not fit: a level's borrowing limit, or nothing idle left at the organisation."""

    level: str | None  # the team whose borrowing limit blocks; None: the organisation
    amount: float  # that borrowing limit; for the organisation, what its pool has left


class TypeQuotas:
    """Quotas and usage of one GPU type at every level of the tree, kept current as usage changes."""

    def __init__(
        self, tree: TeamTree, quotas: Quotas, gpu_type: str, capacity: float, own: Mapping[str, float]
    ) -> None:
        self.tree = tree
        teams = tree.names() | set(quotas) | set(own)
        deepest_first = sorted(teams, key=lambda t: (-len(tree.chain(t)), t))
        self.nominal: dict[str, float] = {}
        self.kept: dict[str, float] = {}
        self.pooled: dict[str, float] = {}
        self.borrowing_limit: dict[str, float | None] = {}
        self.usage: dict[str, float] = defaultdict(float)  # the subtree's GPUs in use
        self.own: dict[str, float] = defaultdict(float, own)  # the team's own jobs' GPUs, its child teams' not
        self.unassigned: dict[str, float] = {}  # nominal beyond its child teams' nominals: its own jobs'
        self.pool_use: dict[str, float] = defaultdict(float)
        child_nominal: dict[str | None, float] = defaultdict(float)
        child_pooled: dict[str | None, float] = defaultdict(float)
        for team in deepest_first:
            quota = quotas.get(team, {}).get(gpu_type)
            nominal = quota.nominal if quota is not None else child_nominal[team]
            pooled = max(0.0, nominal - child_nominal[team]) + child_pooled[team]
            lending = quota.lending_limit if quota is not None else None
            kept = max(0.0, pooled - lending) if lending is not None else 0.0
            self.nominal[team], self.pooled[team], self.kept[team] = nominal, pooled, kept
            self.unassigned[team] = max(0.0, nominal - child_nominal[team])
            self.borrowing_limit[team] = quota.borrowing_limit if quota is not None else None
            parent = self._parent(team)
            child_nominal[parent] += nominal
            child_pooled[parent] += pooled - kept
        self.root_pooled = max(0.0, capacity - child_nominal[None]) + child_pooled[None]
        self.root_use = 0.0
        for team in deepest_first:
            self.usage[team] += own.get(team, 0.0)
            self.pool_use[team] += own.get(team, 0.0)
            parent = self._parent(team)
            spill = max(0.0, self.pool_use[team] - self.kept[team])
            if parent is None:
                self.root_use += spill
            else:
                self.usage[parent] += self.usage[team]
                self.pool_use[parent] += spill

    def _parent(self, team: str) -> str | None:
        chain = self.tree.chain(team)
        return chain[1] if len(chain) > 1 else None

    def _ensure(self, team: str) -> None:
        """A team first seen now (no quota, no usage, not in the tree) sits under the organisation."""
        if team not in self.nominal:
            self.nominal[team] = self.pooled[team] = self.kept[team] = self.unassigned[team] = 0.0
            self.borrowing_limit[team] = None

    def add(self, team: str, gpus: float) -> None:
        """The team's own jobs use ``gpus`` more (or fewer, when negative)."""
        self._ensure(team)
        self.own[team] += gpus
        spill = gpus
        for level in self.tree.chain(team):
            self.usage[level] += gpus
            if spill != 0.0:
                kept = self.kept[level]
                before = max(0.0, self.pool_use[level] - kept)
                self.pool_use[level] += spill
                spill = max(0.0, self.pool_use[level] - kept) - before
        self.root_use += spill

    def over(self, team: str) -> bool:
        """Whether the team's subtree uses more than its nominal."""
        self._ensure(team)
        return self.usage[team] > self.nominal[team] + EPSILON

    def own_over(self, team: str) -> bool:
        """Whether the team's own jobs use more than its unassigned quota: past it, they use what its child
        teams leave idle of their nominal (or what is lent from above), which the child teams may take back."""
        self._ensure(team)
        return self.own[team] > self.unassigned[team] + EPSILON

    def within(self, team: str, gpus: float) -> bool:
        self._ensure(team)
        return self.usage[team] + gpus <= self.nominal[team] + EPSILON

    def room(self, team: str) -> tuple[float, float]:
        """The team's usage and the most it may use within its nominal: ``within(team, gpus)`` is
        ``usage + gpus <= most``, the same sum (for asking of many sizes at once)."""
        self._ensure(team)
        return self.usage[team], self.nominal[team] + EPSILON

    def lends_nothing_to(self, team: str, gpus: float) -> bool:
        """Whether ``gpus`` more for the team's own jobs borrow at no level: within its nominal, and its own
        jobs within its unassigned quota (``own_over``)."""
        return self.within(team, gpus) and self.own[team] + gpus <= self.unassigned[team] + EPSILON

    def left(self) -> float:
        """Idle quota still in the organisation's pool."""
        return self.root_pooled - self.root_use

    def block(self, team: str, gpus: float, to_organisation: bool = True) -> Block | None:
        """Where ``gpus`` more for the team's own jobs would not fit, nearest level first; None when
        they fit. Without ``to_organisation`` the organisation's pool is not asked (an owner within
        its nominal takes its quota back by reclaim, not from the pool)."""
        self._ensure(team)
        need = gpus
        for level in self.tree.chain(team):
            kept, use = self.kept[level], self.pool_use[level]
            free = max(0.0, kept - use)
            if need <= free + EPSILON:
                return None
            need -= free
            limit = self.borrowing_limit[level]
            if limit is not None and need > self.pooled[level] - kept - max(0.0, use - kept) + limit + EPSILON:
                return Block(level, limit)
        if to_organisation and need > self.left() + EPSILON:
            return Block(None, gpus - need + self.left() - max(0.0, self.nominal[team] - self.usage[team]))
        return None

    def borrowable(self, team: str) -> float:
        """What the team may still borrow from the pools above it, borrowing limits aside."""
        self._ensure(team)
        free = sum(max(0.0, self.kept[level] - self.pool_use[level]) for level in self.tree.chain(team))
        return free + self.left() - max(0.0, self.nominal[team] - self.usage[team])

    def save(self) -> tuple[dict[str, float], dict[str, float], dict[str, float], float]:
        return dict(self.usage), dict(self.own), dict(self.pool_use), self.root_use

    def restore(self, saved: tuple[dict[str, float], dict[str, float], dict[str, float], float]) -> None:
        usage, own, pool_use, self.root_use = saved
        self.usage, self.own, self.pool_use = (
            defaultdict(float, usage),
            defaultdict(float, own),
            defaultdict(float, pool_use),
        )
