"""The simulated cluster between cycles: free GPUs, live allocations, pending and running jobs.

Everything is indexed so that each cycle's Snapshot holds only what can change its plan:

- Nodes are bucketed by shape (their GPUs) and free-GPU count, names sorted; a free GPU is an
  empty one (a GPU that holds a fraction of a fractional job is not free). Rankers see only a
  node's own free capacity (its empty GPUs), so nodes in one bucket rank equally and the scheduler
  takes them in name order: when the cycle's jobs need at most N nodes in all, the first N
  of each bucket are all it can pick. Not so for a gang packed by topology (a rack): which
  domain holds it whole depends on every node with room, so with one pending, every node with
  free GPUs is passed.
- Fractional jobs go first to the shared GPU (partly held by fractions) with the least room
  that fits, on any node: so when a fractional job is passed, so is every node with a shared GPU
  that has room for the smallest fraction passed, besides the buckets (each fractional job takes
  at most one node from those).
- Pending jobs are grouped by request, in policy order; a group passes only as many jobs as
  the free GPUs could take (one more under a policy that starts jobs strictly in order: the first
  that cannot start holds back the rest), plus (under a preemptive policy) every job whose level is
  above a running job's: only those can preempt.
- Running jobs are indexed by preemption level. A running job enters the snapshot (with its
  nodes and everything live on them) only when some pending job has a higher level, so a
  cycle without possible victims is as small as one without preemption.
- The one exception is the timeline of running jobs' time limits: when a running job has one
  and the scheduler may read it (a backfill reservation, or a job waiting for a faster GPU type
  it prefers under a speed table), the cycle gets the full picture, as the head builds it. A
  held-back job takes nothing, so the free GPUs could serve jobs the pruning would leave out.
  Under backfill a pending job's time limit counts too: placed in the cycle, it joins the
  timeline the reservation is made on.
- With team quotas every cycle gets the full picture too: a team's usage counts all of its
  running jobs, and a job held out by its quota takes nothing either.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice

from corral.model import EPSILON, FULL_GPU, Allocation, Job, LiveAllocation, Node, Quotas, Request, RunningJob
from corral.sched import Placement, Policy, Snapshot
from corral.sched.node_capacity import rounded
from corral.sim.needs import NodeNeeds
from corral.sim.room import free_slots, room_for, shared_with_room

_QueueEntry = tuple[tuple[int, ...], str, Job]

CHANGES_KEPT = 4
"""Node changes kept (``ClusterState.changed_since``), per node and 16 more: who asks after older ones counts
every node again."""


class ClusterState:
    """What the engine changes between cycles; ``snapshot`` builds the next cycle's input."""

    def __init__(
        self,
        nodes: Sequence[Node],
        policy: Policy,
        prune: bool,
        gpu_speed: Mapping[str, float] | None = None,
        quotas: Quotas | None = None,
        team_parents: Mapping[str, str] | None = None,
    ) -> None:
        self.prune = prune
        self.policy = policy
        self.gpu_speed = dict(gpu_speed or {})  # what the scheduler reads (``Snapshot.gpu_speed``)
        self.quotas = dict(quotas or {})  # ``Snapshot.quotas``: teams' usage counts every running job
        self.team_parents = dict(team_parents or {})
        # The head passes running jobs whenever the scheduler may read them; so does the full snapshot.
        self.reads_running = policy.preemption or policy.backfill or bool(self.gpu_speed) or bool(self.quotas)
        self.nodes = {n.name: n for n in sorted(nodes, key=lambda n: n.name)}
        self.live: dict[str, dict[str, LiveAllocation]] = {name: {} for name in self.nodes}
        self.free = {name: len(n.gpus) for name, n in self.nodes.items()}  # empty GPUs
        self.shares: dict[str, dict[int, float]] = {}  # node -> GPU index -> fraction held there by fractional jobs
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
        self.pending_levels: Counter[int] = Counter()
        self.queue_levels: dict[Request, Counter[int]] = {}  # per request, as ``pending_levels``
        self.running_nodes: dict[str, tuple[str, ...]] = {}  # job id -> nodes it runs on
        self.running_level: dict[str, int] = {}
        self.levels: dict[int, set[str]] = {}  # level -> running job ids
        self.timed: set[str] = set()  # running jobs with a time limit: the timeline's releases
        self.pending_timed = 0  # pending jobs with a time limit: placed in a cycle, they join its timeline
        self.pending_fractional = 0  # pending jobs asking for a fraction of a GPU
        self._hosts: dict[tuple[str, int], dict[str, int]] = {}
        # Nodes whose free GPUs, running jobs or their levels changed, in turn; the oldest are dropped.
        self._changes: list[str] = []
        self._dropped = 0
        self._keep = CHANGES_KEPT * (len(self.nodes) + 16)
        self._lows: dict[str, int] = {}  # node -> the lowest level of a job running there, in the index
        self._by_low: dict[int, list[str]] = {}  # that level -> those nodes, sorted
        self._lows_seen = -1  # changes counted into ``_lows``
        self.needs = NodeNeeds(self)

    @property
    def pending_count(self) -> int:
        return len(self.keys)

    def add(self, job: Job) -> None:
        """Queue a job (new, or back from preemption)."""
        entry = (self.policy.job_order(job), job.id, job)
        insort(self.queues.setdefault(job.request, []), entry, key=_entry_key)
        self.keys[job.id] = entry
        if job.time_limit_s is not None:
            self.pending_timed += 1
        if job.request.fractional:
            self.pending_fractional += 1
        if self.policy.preemption:
            level = self.policy.level(job)
            self.pending_levels[level] += 1
            self.queue_levels.setdefault(job.request, Counter())[level] += 1

    def start(self, job: Job, placement: Placement, running: RunningJob) -> None:
        entry = self.keys.pop(job.id)
        queue = self.queues[job.request]
        del queue[bisect_left(queue, _entry_key(entry), key=_entry_key)]
        if job.time_limit_s is not None:
            self.pending_timed -= 1
        if job.request.fractional:
            self.pending_fractional -= 1
        if self.policy.preemption:
            level = self.policy.level(job)
            for counts in (self.pending_levels, self.queue_levels[job.request]):
                counts[level] -= 1
                if not counts[level]:
                    del counts[level]
            self.relevel(job.id, running)
        self.running_nodes[job.id] = tuple(a.node for a in placement.allocations)
        if job.time_limit_s is not None:
            self.timed.add(job.id)
        for alloc in placement.allocations:
            self.live[alloc.node][job.id] = LiveAllocation(job.id, alloc)
            self._hold(alloc, +1)

    def release(self, placement: Placement) -> None:
        """A running job ends (finished or preempted): its GPUs are free now."""
        job_id = placement.job_id
        self.running_nodes.pop(job_id, None)
        self.timed.discard(job_id)
        if (level := self.running_level.pop(job_id, None)) is not None:
            self._unlevel(job_id, level)
        for alloc in placement.allocations:
            del self.live[alloc.node][job_id]
            self._hold(alloc, -1)

    def relevel(self, job_id: str, running: RunningJob) -> None:
        """Index a running job by its level now (at its start, and when it crosses a threshold)."""
        if (old := self.running_level.get(job_id)) is not None:
            self._unlevel(job_id, old)
        level = self.policy.level(running)
        self.running_level[job_id] = level
        self.levels.setdefault(level, set()).add(job_id)
        self._changed(self.running_nodes.get(job_id, ()))

    def _unlevel(self, job_id: str, level: int) -> None:
        ids = self.levels[level]
        ids.discard(job_id)
        if not ids:
            del self.levels[level]

    def lowest_running(self) -> int | None:
        """The lowest level of a running job (costs the number of distinct levels, not of jobs)."""
        return min(self.levels, default=None) if self.policy.preemption else None

    def _move(self, name: str, change: int) -> None:
        shape, free = self.shape[name], self.free[name]
        bucket = self.buckets[(shape, free)]
        del bucket[bisect_left(bucket, name)]
        self.free[name] = free + change
        insort(self.buckets.setdefault((shape, free + change), []), name)
        self._changed((name,))

    def _changed(self, names: Iterable[str]) -> None:
        changes = self._changes
        changes.extend(names)
        if len(changes) > self._keep:
            drop = len(changes) // 2
            del changes[:drop]
            self._dropped += drop

    def changed_since(self, seen: int) -> tuple[set[str] | None, int]:
        """The nodes whose free GPUs, running jobs or their levels changed since ``seen`` (a count this
        returned before), None when no longer known (count every node again); and the count now."""
        now = self._dropped + len(self._changes)
        if seen < self._dropped:
            return None, now
        return set(self._changes[seen - self._dropped :]), now

    def _hold(self, alloc: Allocation, sign: int) -> None:
        """Take (+1) or give back (-1) an allocation's GPUs, whole or a fraction of them."""
        if alloc.gpu_fraction < FULL_GPU:
            self._share(alloc, sign)
        else:
            self._move(alloc.node, -sign * len(alloc.gpus))

    def _share(self, alloc: Allocation, sign: int) -> None:
        """Take (+1) or give back (-1) a fractional allocation's share of its GPUs: a GPU is free only
        while no fraction is held on it."""
        shares = self.shares.setdefault(alloc.node, {})
        for index in alloc.gpus:
            before = shares.get(index, 0.0)
            after = rounded(before + sign * alloc.gpu_fraction)  # as the scheduler's capacity rounds it
            if after > EPSILON:
                shares[index] = after
                if before <= EPSILON:
                    self._move(alloc.node, -1)
            else:
                shares.pop(index, None)
                if before > EPSILON:
                    self._move(alloc.node, +1)
        if not shares:
            del self.shares[alloc.node]

    def victims(self) -> list[str]:
        """Running jobs some pending job outranks (a superset of the possible victims), by id."""
        if not self.policy.preemption or not self.pending_count:
            return []
        top = max((level for level, count in self.pending_levels.items() if count > 0), default=None)
        if top is None:
            return []
        return sorted(j for level, ids in self.levels.items() if level < top for j in ids)

    def snapshot(self, running: Callable[[Iterable[str]], tuple[RunningJob, ...]]) -> Snapshot | None:
        """The next cycle's input, or None when no pending job could be placed or preempt now.

        ``running`` gives the scheduler's view of the named running jobs at this moment.
        """
        if not self.pending_count:
            return None
        if not self.prune or self.quotas or self.timeline_matters():
            pending = tuple(e[2] for q in self.queues.values() for e in q)
            live = tuple(a for by_job in self.live.values() for a in by_job.values())
            everyone = running(sorted(self.running_nodes)) if self.reads_running else ()
            return Snapshot(
                nodes=tuple(self.nodes.values()),
                live=live,
                pending=pending,
                running=everyone,
                quotas=self.quotas,
                gpu_speed=self.gpu_speed,
                team_parents=self.team_parents,
            )
        return self._pruned(self.victims(), running)

    def prunes(self) -> bool:
        """Whether ``snapshot`` passes the pruned picture (else every node, pending and running job)."""
        return self.prune and not self.quotas and not self.timeline_matters()

    def hosts(self, gpu_type: str, slots: int) -> dict[str, int]:
        """The nodes with at least ``slots`` GPUs of the type, and how many they have (computed once)."""
        key = (gpu_type, slots)
        found = self._hosts.get(key)
        if found is None:
            found = self._hosts[key] = {
                name: len(node.gpus)
                for name, node in self.nodes.items()
                if self.node_type.get(name) == gpu_type and len(node.gpus) >= slots
            }
        return found

    def hosting_below(self, top: int) -> Iterable[str]:
        """The nodes where a job runs below level ``top`` in the index, in name order (under a preemptive
        policy); each node's lowest level is kept, and counted again only where something changed."""
        changed, self._lows_seen = self.changed_since(self._lows_seen)
        lows, by_low = self._lows, self._by_low
        for name in self.nodes if changed is None else changed:
            old = lows.pop(name, None)
            if old is not None:
                names = by_low[old]
                del names[bisect_left(names, name)]
                if not names:
                    del by_low[old]
            if here := self.live[name]:
                low = lows[name] = min(self.running_level[j] for j in here)
                insort(by_low.setdefault(low, []), name)
        below = [names for low, names in by_low.items() if low < top]
        return below[0] if len(below) == 1 else heapq.merge(*below)

    def top_pending(self) -> int | None:
        """The highest level of a pending job, under a preemptive policy."""
        return max(self.pending_levels, default=None) if self.policy.preemption else None

    def with_victims(
        self, victims: Sequence[str], lowest: int, running: Callable[[Iterable[str]], tuple[RunningJob, ...]]
    ) -> Snapshot | None:
        """The pruned input passing only ``victims`` (with their nodes and everything live there) as running
        jobs, and the pending jobs that ``snapshot`` passes when the lowest possible victim is at ``lowest``."""
        return self._pruned(victims, running, lowest)

    def lean(self) -> Snapshot | None:
        """The cycle's input without running jobs (so without preemption), pruned; None when nothing fits."""
        if not self.prune or not self.pending_count or self.quotas or self.timeline_matters():
            return None
        return self._pruned([], lambda ids: ())

    def timeline_matters(self) -> bool:
        """Whether running jobs' time limits may change this cycle's plan beyond what pruning keeps.

        They do under a backfill policy (a reservation, and the guard it puts on later jobs), and
        under a speed table for a job that lists several GPU types (it may wait for a faster one).
        A backfill reservation also counts the time limits of jobs placed earlier in the same cycle,
        so there a pending job with a time limit makes the timeline matter too: the reservation
        goes to the first job that stays blocked after it, which pruning could leave out.
        """
        if self.policy.backfill and (self.timed or self.pending_timed):
            return True
        if not self.timed:
            return False
        return bool(self.gpu_speed) and any(len(r.gpu_types) > 1 for r, queue in self.queues.items() if queue)

    def count_above(self, lowest: int) -> int:
        """How many pending jobs have a level above ``lowest`` (a running job's): those that could preempt."""
        return sum(count for level, count in self.pending_levels.items() if level > lowest)

    def _pruned(
        self,
        victims: Sequence[str],
        running: Callable[[Iterable[str]], tuple[RunningJob, ...]],
        lowest: int | None = None,
    ) -> Snapshot | None:
        if lowest is None:
            lowest = min((self.running_level[v] for v in victims), default=None)
        slots = free_slots(self)
        jobs: list[Job] = []
        rooms = {request: room_for(self, request, slots) if queue else 0 for request, queue in self.queues.items()}
        # Under a strict order the first job that cannot start holds back the rest, so it is passed too:
        # one job past the room of each request. With no room for any request, nothing starts.
        strict = self.policy.strict_order
        if strict and not victims and not any(rooms.values()):
            return None
        for request, queue in self.queues.items():
            room = rooms[request] + 1 if strict and queue else rooms[request]
            above = 0 if lowest is None else sum(c for v, c in self.queue_levels[request].items() if v > lowest)
            if lowest is None or not above:
                jobs.extend(e[2] for e in queue[:room])
                continue
            level = self.policy.level
            for k, (_, _, job) in enumerate(queue):  # policies rank high levels first: this stops early
                if level(job) > lowest:
                    jobs.append(job)
                    above -= 1
                elif k < room:
                    jobs.append(job)
                if not above and k + 1 >= room:
                    break
        if not jobs:
            return None
        # A gang goes to the fewest topology domains that hold it, judged on every node with room for a
        # share of it: then every node with free GPUs is passed, not only the first of each kind.
        domains = any(j.request.nodes > 1 and j.request.topology is not None for j in jobs)
        wanted = None if domains else sum(j.request.nodes for j in jobs)
        names = {n for (_, free), names in self.buckets.items() if free > 0 for n in names[:wanted]}
        if self.pending_fractional and self.shares:
            names.update(shared_with_room(self, jobs))
        names.update(n for v in victims for n in self.running_nodes[v])
        if strict:  # a job waiting for busy nodes must still be seen to fit the cluster, so that it holds back the rest
            for request in {j.request for j in jobs}:
                for gpu_type in request.gpu_types or self.types:
                    names.update(islice(self.hosts(gpu_type, request.gpu_slots_per_node), request.nodes))
        ordered = sorted(names)
        nodes = tuple(self.nodes[n] for n in ordered)
        live = tuple(a for n in ordered for a in self.live[n].values())
        return Snapshot(
            nodes=nodes,
            live=live,
            pending=tuple(jobs),
            running=running(victims) if victims else (),
            gpu_speed=self.gpu_speed,
        )


def _entry_key(entry: _QueueEntry) -> tuple[tuple[int, ...], str]:
    return entry[0], entry[1]
