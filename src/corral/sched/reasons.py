"""Why each job left waiting was not placed, in words that say what it waits for."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Container, Mapping, Sequence
from itertools import islice

import numpy as np

from corral.model import Job, Request
from corral.sched import describe
from corral.sched.feasibility import ClusterShapes, largest_domain, never_runs, required_domain
from corral.sched.order import Groups, Queue
from corral.sched.placement import candidates
from corral.sched.plan import NEVER_FITS, NO_NODES, QUOTA, RESOURCES, Reason
from corral.sched.reason_map import Reasons
from corral.sched.snapshot import CapacityView, Snapshot


def explain(
    line: Line,
    view: CapacityView,
    snapshot: Snapshot,
    known: Mapping[str, tuple[str, str]] | None = None,
    unchecked: Container[str] = (),
    quota: Callable[[Job, Request], str | None] | None = None,
    groups: Groups | None = None,
    rest: Queue | None = None,
    behind: Reason | None = None,
) -> Reasons:
    """A reason per waiting job of ``line`` (in queue order, and kept in it), judged on what is left free in ``view``.

    ``known`` gives the code and message of jobs whose reason the cycle already knows (they keep
    their place in the queue, unless their request can never fit). ``quota`` says why
    its team's quota keeps out a job of ``unchecked``, or one waiting as a member of its group (below),
    that has no known reason (asked once per team and request: the answer is the same for all their jobs).

    Some jobs of ``line`` may wait as members of their group of the queue (team and request, numbered by
    ``groups``); no such job has a known reason, and their reasons are found once per group. ``rest`` is the
    rest of the queue (after ``line``), waiting as a whole,
    its jobs as members of their groups; with ``behind``, that is the reason of each job of ``rest`` waiting
    only for resources (a policy that starts jobs strictly in order; then no job of ``line`` is a member).

    Jobs with the same reason share one ``Reason`` (a queue position is the job's place in
    ``line``, see ``Plan.position``), so a cycle leaving 100,000 jobs waiting makes one per request and
    team at most (a few thousand), not one per job."""
    if not line.ids and not rest:  # (None or empty)
        return Reasons.of({})
    registered, unavailable = snapshot.shapes, snapshot.unavailable_shapes
    known = known or {}
    jobs, requests = line.jobs, line.requests
    # id(request) → (its reason, team → the reason of the team's jobs not checked against quota). By
    # identity: hashing a request costs a Python call per job, and ``requests`` keeps every request alive.
    by_request: dict[int, tuple[Reason, dict[str, Reason]]] = {}

    def base_of(request: Request) -> tuple[Reason, dict[str, Reason]]:
        found = by_request.get(id(request))
        if found is None:
            found = by_request[id(request)] = (_reason(request, view, snapshot, registered, unavailable), {})
        return found

    def unchecked_reason(job: Job, request: Request, base: Reason, teams: dict[str, Reason]) -> Reason:
        found = teams.get(job.team)
        if found is None:
            problem = None if quota is None else quota(job, request)
            found = teams[job.team] = base if problem is None else Reason(QUOTA, problem, base.queued)
        return found

    said: dict[int, Reason] = {}  # by number (``Reasons``): a job's own below zero, a group's its number
    own: dict[str, int] = {}
    for number, job, request in zip(range(-1, -len(jobs) - 1, -1), jobs, requests, strict=True):
        base, teams = base_of(request)
        own[job.id] = number
        found = known.get(job.id)
        if found is not None:
            said[number] = Reason(found[0], found[1], base.queued)
        elif quota is not None and job.id in unchecked:
            said[number] = unchecked_reason(job, request, base, teams)
        else:
            said[number] = base
    numbers: Sequence[int] = line.numbers
    if len(line.ids) > len(jobs) or rest:
        assert groups is not None and (behind is None or len(line.ids) == len(jobs))
        # Kept by the plan: an array of numbers (which the collector does not walk, as it walks a list's items
        # after each cycle) and the ids in one tuple.
        every = np.array(numbers, dtype=np.int64)
        if rest:
            every = np.concatenate((every, rest.numbers))
        numbers = array("q", every.tobytes())
        for group in np.unique(every[every >= 0]).tolist():
            job, request = groups.member(group)
            base, teams = base_of(request)
            if behind is not None and base.code == RESOURCES:  # it could start but for the job ahead
                said[group] = behind
            else:
                said[group] = unchecked_reason(job, request, base, teams)
    ids = (*line.ids, *rest.ids.tolist()) if rest else line.ids
    return Reasons(ids, numbers, said, own)


class Line:
    """The jobs waiting so far, in queue order: each job looked at one by one (``jobs``, with its request:
    equal ones best given as one object) or as a member of its group of the queue (by its ``order`` item);
    ``explain`` reads it."""

    __slots__ = ("ids", "jobs", "numbers", "requests")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.numbers: list[int] = []  # -k for ``jobs[k - 1]``; a member's group number
        self.jobs: list[Job] = []
        self.requests: list[Request] = []

    def add(self, job: Job, request: Request) -> None:
        """A job looked at one by one."""
        self.jobs.append(job)
        self.requests.append(request)
        self.ids.append(job.id)
        self.numbers.append(-len(self.jobs))


def _reason(
    request: Request, view: CapacityView, snapshot: Snapshot, registered: ClusterShapes, unavailable: ClusterShapes
) -> Reason:
    problem = never_runs(request, snapshot.nodes, registered)
    if problem is not None:
        return Reason(NEVER_FITS, f"can never run on this cluster: {problem}")
    if not view.nodes:
        return Reason(NO_NODES, _no_nodes(snapshot), queued=True)
    return Reason(RESOURCES, _waiting_for(request, view, unavailable), queued=True)


def _no_nodes(snapshot: Snapshot) -> str:
    if not snapshot.nodes:
        return "waiting for a node to join: none is registered yet"
    states = Counter(n.state for n in snapshot.nodes)
    detail = ", ".join(f"{count} {state.lower().replace('_', ' ')}" for state, count in sorted(states.items()))
    if len(snapshot.nodes) == 1:
        return f"waiting for a node to become ready: the one registered node is not ready ({detail})"
    total = describe.plural(len(snapshot.nodes), "registered node")
    return f"waiting for a node to become ready: none of the {total} is ready ({detail})"


def _waiting_for(request: Request, view: CapacityView, unavailable: ClusterShapes) -> str:
    nodes = request.nodes
    types: Sequence[str | None] = (request.gpu_types or view.gpu_types) if request.gpus_per_node > 0 else [None]
    text = f"waiting for {describe.nodes_with(request, request.gpu_types, free=True)}"
    label = required_domain(request)
    if label is None:
        have = max((sum(1 for _ in islice(candidates(view, request, t), nodes)) for t in types), default=0)
        have_text = "none has" if have == 0 else f"{describe.plural(have, 'node')} {'has' if have == 1 else 'have'}"
        text += f" ({have_text} that now)"
    else:
        free = ((c.node.node for c in candidates(view, request, t)) for t in types)
        most = max((largest_domain(nodes_of_type, label) for nodes_of_type in free), default=0)
        text += f", all in one {label} (the most one {label} has now is {most})"
    if down := unavailable.count_holding(request):
        text += f"; {describe.plural(down, 'matching node')} {'is' if down == 1 else 'are'} drained or not ready"
    return text
