"""Why each job left waiting was not placed, in words that say what it waits for."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Container, Mapping, Sequence
from itertools import islice

from corral.model import Job, Request
from corral.sched import describe
from corral.sched.feasibility import ClusterShapes, largest_domain, never_runs, required_domain
from corral.sched.order import Item, group_of, id_of
from corral.sched.placement import candidates
from corral.sched.plan import NEVER_FITS, NO_NODES, QUOTA, RESOURCES, Reason
from corral.sched.reason_map import Reasons
from corral.sched.snapshot import CapacityView, Snapshot


def explain(
    waiting: Sequence[Job],
    view: CapacityView,
    snapshot: Snapshot,
    known: Mapping[str, tuple[str, str]] | None = None,
    requests: Sequence[Request] | None = None,
    unchecked: Container[str] = (),
    quota: Callable[[Job, Request], str | None] | None = None,
    rest: tuple[Sequence[Item], Callable[[int], tuple[Job, Request]]] | None = None,
    behind: Reason | None = None,
) -> Reasons:
    """A reason per waiting job (given in queue order, and kept in it), judged on what is left free in ``view``.

    ``known`` gives the code and message of jobs whose reason the cycle already knows (they keep
    their place in the queue, unless their request can never fit). ``requests``, when given, are
    the jobs' requests in the same order (equal ones best given as one object). ``quota`` says why
    its team's quota keeps out a job of ``unchecked``, or of ``rest``, that has no known reason (asked
    once per team and request: the answer is the same for all their jobs). ``rest`` is the rest of the
    queue (``order`` items, after ``waiting``), waiting as a whole, with a job and the request of each group
    by its number (``Groups.member``): no job there has a known reason, and its reasons are found once per
    group (team and request) of the queue; with ``behind``, that is the reason of each job of ``rest``
    waiting only for resources (a policy that starts jobs strictly in order).

    Jobs with the same reason share one ``Reason`` (a queue position is the job's place in
    ``waiting``, see ``Plan.position``), so a cycle leaving 100,000 jobs waiting makes one per request and
    team at most (a few thousand), not one per job."""
    if not waiting and not rest:
        return Reasons({})
    registered, unavailable = snapshot.shapes, snapshot.unavailable_shapes
    known = known or {}
    if requests is None:
        requests = [job.request for job in waiting]
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

    reasons: dict[str, Reason] = {}
    for job, request in zip(waiting, requests, strict=True):
        base, teams = base_of(request)
        own = known.get(job.id)
        if own is not None:
            reasons[job.id] = Reason(own[0], own[1], base.queued)
        elif quota is not None and job.id in unchecked:
            reasons[job.id] = unchecked_reason(job, request, base, teams)
        else:
            reasons[job.id] = base
    if not rest:
        return Reasons(reasons)
    # Kept by the plan: an array of group numbers (which the collector does not walk, as it walks a list's
    # items after each cycle) and the ids in one tuple with the others (``Reasons.ids``).
    items, member = rest
    numbers = list(map(group_of, items))  # (an array built from a list is built faster than from an iterator)
    said: dict[int, Reason] = {}
    for group in dict.fromkeys(numbers):
        job, request = member(group)
        base, teams = base_of(request)
        if behind is not None and base.code == RESOURCES:  # it could start but for the job ahead
            said[group] = behind
        else:
            said[group] = unchecked_reason(job, request, base, teams)
    return Reasons(reasons, map(id_of, items), array("l", numbers), said)


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
