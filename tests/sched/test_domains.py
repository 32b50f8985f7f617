"""A view's kept count of gang candidates per topology domain gives the choice a full scan of the nodes gives."""

from __future__ import annotations

import random

from corral.model import Allocation, Gpu, Node, NodeState, Request
from corral.sched import get_policy
from corral.sched.placement import _by_domain, _choose_on, _whole_choice
from corral.sched.snapshot import CapacityView, Snapshot

POLICY = get_policy("default")
TYPES = ("H100", "A100")


def cluster(rng: random.Random) -> tuple[Node, ...]:
    nodes = []
    for i in range(40):
        gpus = tuple(
            Gpu(index=g, type=TYPES[i % 2 if i % 5 else 0], memory_mb=81920) for g in range(rng.choice((4, 8)))
        )
        labels = {} if rng.random() < 0.15 else {"rack": f"r{rng.randrange(6)}", "block": f"b{i // 20}"}
        nodes.append(Node(f"n{i:02d}", NodeState.READY, gpus, 64.0, 1 << 19, labels))
    return tuple(nodes)


def scanned(view: CapacityView, request: Request, gpu_type: str) -> list[str] | None:
    """The choice as a scan of every candidate node makes it."""
    nodes = view.nodes_with_empty(gpu_type, request.gpu_slots_per_node)
    chosen = _by_domain(((n, n) for n in nodes), request, _whole_choice)
    return None if chosen is None else [c.node.name for c in chosen]


def counted(view: CapacityView, request: Request, gpu_type: str) -> list[str] | None:
    chosen = _choose_on(view, request, gpu_type)
    return None if chosen is None else [c.node.name for c in chosen]


def test_gangs_go_where_a_scan_of_every_node_sends_them_while_the_view_changes():
    rng = random.Random(7)
    for trial in range(12):
        nodes = cluster(rng)
        view = CapacityView(Snapshot(nodes=nodes), POLICY.gpu_ranker, POLICY.cpu_ranker)
        for step in range(60):
            if rng.random() < 0.2:
                view = view.copy()  # counts are carried by copies, and each copy keeps its own
            request = Request(
                nodes=rng.randint(2, 6),
                gpus_per_node=float(rng.choice((1, 2, 4, 8))),
                gpu_types=(rng.choice(TYPES),),
                topology=rng.choice(("rack", "block")),
                topology_required=rng.random() < 0.3,
            )
            gpu_type = request.gpu_types[0]
            assert counted(view, request, gpu_type) == scanned(view, request, gpu_type), f"trial {trial}, step {step}"
            node = view.nodes[rng.choice(sorted(view.nodes))]
            empty = node.empty_gpus(node.gpu_types[0])
            if empty and rng.random() < 0.6:
                taken = tuple(sorted(rng.sample(empty, rng.randint(1, len(empty)))))
                view.take([Allocation(node.name, taken, 1.0)])
            elif len(empty) < len(node.node.gpus):
                busy = tuple(i for i in node.indices(node.gpu_types[0]) if i not in empty)
                view.release([Allocation(node.name, busy[:1], 1.0)])


def test_a_gang_no_domain_holds_spills_over_domains_or_waits_when_its_domain_is_required():
    nodes = tuple(
        Node(
            f"n{i}",
            NodeState.READY,
            tuple(Gpu(g, "H100", 81920) for g in range(8)),
            64.0,
            1 << 19,
            {"rack": f"r{i % 3}"},
        )
        for i in range(6)
    )  # two nodes in each of three racks
    view = CapacityView(Snapshot(nodes=nodes), POLICY.gpu_ranker, POLICY.cpu_ranker)
    spanning = Request(nodes=3, gpus_per_node=8.0, gpu_types=("H100",), topology="rack")
    assert counted(view, spanning, "H100") == scanned(view, spanning, "H100")
    assert len(set(counted(view, spanning, "H100") or [])) == 3
    required = Request(nodes=3, gpus_per_node=8.0, gpu_types=("H100",), topology="rack", topology_required=True)
    assert counted(view, required, "H100") is None
    pair = Request(nodes=2, gpus_per_node=8.0, gpu_types=("H100",), topology="rack", topology_required=True)
    view.take([Allocation("n0", (0,), 1.0)])  # rack r0 now has one whole node left: the pair goes elsewhere
    chosen = counted(view, pair, "H100")
    assert chosen is not None and {n[-1] for n in chosen} <= {"1", "2", "4", "5"}
    assert chosen == scanned(view, pair, "H100")
