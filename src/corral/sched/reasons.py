"""Why each job left waiting was not placed, in words that say what it waits for."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Mapping, Sequence
from itertools import islice

from corral.model import Job, Request
from corral.sched import describe
from corral.sched.feasibility import ClusterShapes, largest_domain, no_domain_holds, required_domain
from corral.sched.placement import candidates
from corral.sched.plan import NEVER_FITS, NO_NODES, QUOTA, RESOURCES, Reason
from corral.sched.snapshot import CapacityView, Snapshot


def explain(
    waiting: Sequence[Job],
    view: CapacityView,
    snapshot: Snapshot,
    known: Mapping[str, tuple[str, str]] | None = None,
    requests: Sequence[Request] | None = None,
    unchecked: Container[str] = (),
    quota: Callable[[Job, Request], str | None] | None = None,
) -> dict[str, Reason]:
    """A reason per waiting job (given in queue order), judged on what is left free in ``view``.

    ``known`` gives the code and message of jobs whose reason the cycle already knows (their
    queue position is added here, unless their request can never fit). ``requests``, when given,
    are the jobs' requests in the same order (equal ones best given as one object). ``quota`` says why
    its team's quota keeps out a job of ``unchecked`` that has no known reason (asked once per team
    and request: the answer is the same for all their jobs)."""
    if not waiting:
        return {}
    registered, unavailable = snapshot.shapes, snapshot.unavailable_shapes
    known = known or {}
    # request → (code, message, never fits, team → its quota's code and message, None when it admits)
    by_request: dict[Request, tuple[str, str, bool, dict[str, tuple[str, str] | None]]] = {}
    reasons: dict[str, Reason] = {}
    length = len(waiting)
    if requests is None:
        requests = [job.request for job in waiting]
    for position, (job, request) in enumerate(zip(waiting, requests, strict=True), start=1):
        base = by_request.get(request)
        if base is None:
            found = _reason(request, view, snapshot, registered, unavailable)
            base = by_request[request] = (found.code, found.message, found.code == NEVER_FITS, {})
        own = known.get(job.id)
        if own is None and quota is not None and job.id in unchecked:
            teams = base[3]
            if job.team not in teams:
                problem = quota(job, request)
                teams[job.team] = None if problem is None else (QUOTA, problem)
            own = teams[job.team]
        if base[2]:
            reasons[job.id] = Reason(base[0], base[1]) if own is None else Reason(own[0], own[1], 0, 0)
        elif own is None:
            reasons[job.id] = Reason(base[0], base[1], position, length)
        else:
            reasons[job.id] = Reason(own[0], own[1], position, length)
    return reasons


def _reason(
    request: Request, view: CapacityView, snapshot: Snapshot, registered: ClusterShapes, unavailable: ClusterShapes
) -> Reason:
    problem = registered.never_fits(request) or no_domain_holds(request, snapshot.nodes, registered)
    if problem is not None:
        return Reason(NEVER_FITS, f"can never run on this cluster: {problem}")
    if not view.nodes:
        return Reason(NO_NODES, _no_nodes(snapshot))
    return Reason(RESOURCES, _waiting_for(request, view, unavailable))


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
