"""Where one job fits now: GPU type choice, best-fit node choice, gangs and fractional GPUs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import NamedTuple, TypeVar

from corral.model import FULL_GPU, Allocation, Job, Request
from corral.sched.domains import fewest_holding
from corral.sched.node_capacity import NodeCapacity, Rank
from corral.sched.plan import Placement
from corral.sched.snapshot import CapacityView

_T = TypeVar("_T")


class Choice(NamedTuple):
    """One node's share of a placement; lower ``key`` is a better fit. ``gpus`` is empty for a
    whole-GPU share until the node is chosen (the lowest empty indices of the type then)."""

    key: tuple[float, Rank, str]
    node: NodeCapacity
    gpus: tuple[int, ...]


def find_placement(view: CapacityView, job: Job) -> Placement | None:
    """The best placement for the job on what is free in the view now, or None."""
    request = job.request
    if request.gpus_per_node <= 0:
        return _placement(job, None, _choose_on(view, request, None))  # CPU-only
    if request.gpu_types:
        for gpu_type in request.gpu_types:  # the job's preference order
            chosen = _choose_on(view, request, gpu_type)
            if chosen:
                return _placement(job, gpu_type, chosen)
        return None
    best: tuple[tuple[tuple[float, Rank, str], ...], str, list[Choice]] | None = None
    for gpu_type in view.gpu_types:  # any type: the one that fits tightest, then by name
        chosen = _choose_on(view, request, gpu_type)
        if chosen:
            option = (tuple(c.key for c in chosen), gpu_type, chosen)
            best = option if best is None or option[:2] < best[:2] else best
    return None if best is None else _placement(job, best[1], best[2])


def candidates(view: CapacityView, request: Request, gpu_type: str | None) -> Iterator[Choice]:
    """Distinct nodes that could take one node's share of the request now, best fit first."""
    if request.gpus_per_node <= 0 or gpu_type is None:
        return _hosts(view, request)
    if request.fractional:
        return _fractional(view, request, gpu_type)
    return _whole(view, request, gpu_type)


def _whole(view: CapacityView, request: Request, gpu_type: str) -> Iterator[Choice]:
    for node in _whole_nodes(view, request, gpu_type):
        yield _whole_choice(node)  # indices picked once chosen


def _whole_nodes(view: CapacityView, request: Request, gpu_type: str) -> Iterator[NodeCapacity]:
    for node in view.nodes_with_empty(gpu_type, request.gpu_slots_per_node):
        if node.fits_host(request):
            yield node


def _whole_choice(node: NodeCapacity) -> Choice:
    return Choice((0.0, node.gpu_rank, node.name), node, ())


def _fractional(view: CapacityView, request: Request, gpu_type: str) -> Iterator[Choice]:
    # Shared GPUs with the least room left first, so empty GPUs stay whole for whole-GPU jobs.
    seen: set[str] = set()
    for remaining, node, index in view.shared_with_room(gpu_type, request.gpus_per_node):
        if node.name not in seen and node.fits_host(request):
            seen.add(node.name)
            yield Choice((remaining, node.gpu_rank, node.name), node, (index,))
    for node in view.nodes_with_empty(gpu_type, 1):
        if node.name not in seen and node.fits_host(request):
            yield Choice((FULL_GPU, node.gpu_rank, node.name), node, (node.empty_gpus(gpu_type)[0],))


def _hosts(view: CapacityView, request: Request) -> Iterator[Choice]:
    for node in view.hosts():
        if node.fits_host(request):
            yield Choice((0.0, node.cpu_rank, node.name), node, ())


def _choose_on(view: CapacityView, request: Request, gpu_type: str | None) -> list[Choice] | None:
    """``_choose`` over the request's candidates; a whole-GPU gang's are grouped by domain as nodes, and
    only the nodes chosen become ``Choice`` values (a gang may have thousands of candidates)."""
    whole_gpus = gpu_type is not None and request.gpus_per_node > 0 and not request.fractional
    if request.nodes > 1 and request.topology is not None and whole_gpus:
        assert gpu_type is not None
        host_matters = NodeCapacity.host_matters(request)
        if not host_matters:
            decided, chosen = _in_counted_domain(view, request, gpu_type)
            if decided:
                return chosen
        nodes = view.nodes_with_empty(gpu_type, request.gpu_slots_per_node)
        if host_matters:
            nodes = (n for n in nodes if n.fits_host(request))
        return _by_domain(((n, n) for n in nodes), request, _whole_choice)
    return _choose(candidates(view, request, gpu_type), request)


def _choose(choices: Iterator[Choice], request: Request) -> list[Choice] | None:
    """``request.nodes`` distinct nodes, or None when there are fewer: a gang is all or nothing.

    One node: the best fit. A gang: the fewest topology domains (nodes sharing the value of the
    label ``request.topology``, e.g. one rack) that hold it; among domains that hold it whole, the
    one with the fewest candidates, so larger free domains stay whole for larger gangs. With
    ``topology_required`` the gang goes to one domain or waits. Nodes without the label are
    domains of their own.
    """
    count = request.nodes
    if count == 1 or request.topology is None:
        chosen = list(islice(choices, count))
        return chosen if len(chosen) == count else None
    return _by_domain(((c.node, c) for c in choices), request, _same)


def _same(choice: Choice) -> Choice:
    return choice


def _by_domain(
    items: Iterable[tuple[NodeCapacity, _T]], request: Request, choice_of: Callable[[_T], Choice]
) -> list[Choice] | None:
    """``_choose`` for a gang placed by topology domain, over candidates in best-fit order; each
    domain keeps only its first ``request.nodes`` candidates, all a choice can take from it."""
    count, label = request.nodes, request.topology
    assert label is not None
    sizes: dict[str, int] = {}
    firsts: dict[str, list[_T]] = {}
    for node, item in items:
        value = node.node.labels.get(label)
        name = "=" + value if value is not None else "node:" + node.name
        size = sizes.get(name, 0)
        sizes[name] = size + 1
        if not size:
            firsts[name] = [item]
        elif size < count:
            firsts[name].append(item)
    whole = [(sizes[name], choice_of(first[0]).key, name) for name, first in firsts.items() if sizes[name] >= count]
    if whole:
        return [choice_of(item) for item in firsts[min(whole)[2]][:count]]
    if request.topology_required or sum(sizes.values()) < count:
        return None
    ranked = sorted((-sizes[name], choice_of(first[0]).key, name) for name, first in firsts.items())
    return [choice_of(item) for _, _, name in ranked for item in firsts[name]][:count]


def _in_counted_domain(view: CapacityView, request: Request, gpu_type: str) -> tuple[bool, list[Choice] | None]:
    """``_by_domain`` for a whole-GPU gang that only needs empty GPUs, from the view's kept count of
    candidates per domain: (True, the choice) where a domain holds the gang whole or none could
    (``topology_required``, or too few candidates in all); (False, None) where the gang must spill over
    domains, which ``_by_domain`` ranks."""
    count, label, slots = request.nodes, request.topology, request.gpu_slots_per_node
    assert label is not None
    sizes = view.domain_sizes(label, gpu_type, slots)
    value = fewest_holding(sizes, count, view.nodes_with_empty(gpu_type, slots), label)
    if value is None:
        return request.topology_required or sum(sizes.values()) < count, None
    nodes = (view.nodes[name] for name in view.domain_members(label)[value])
    chosen = sorted((n for n in nodes if len(n.empty_gpus(gpu_type)) >= slots), key=_gpu_order)[:count]
    return True, [_whole_choice(node) for node in chosen]


def _gpu_order(node: NodeCapacity) -> tuple[Rank, str]:
    return node.gpu_rank, node.name


def _placement(job: Job, gpu_type: str | None, chosen: list[Choice] | None) -> Placement | None:
    if not chosen:
        return None
    request = job.request
    fraction = request.gpus_per_node if request.fractional else FULL_GPU
    cpus = request.cpus_per_node if request.cpus_per_node is not None else 0.0
    memory_mb = request.memory_mb_per_node if request.memory_mb_per_node is not None else 0
    slots = request.gpu_slots_per_node if gpu_type is not None and not request.fractional else 0
    allocations = tuple(
        Allocation(
            node=c.node.name,
            gpus=c.gpus or (tuple(c.node.empty_gpus(gpu_type)[:slots]) if gpu_type is not None and slots else ()),
            gpu_fraction=fraction,
            cpus=cpus,
            memory_mb=memory_mb,
        )
        for c in chosen
    )
    return Placement(job_id=job.id, gpu_type=gpu_type, allocations=allocations)
