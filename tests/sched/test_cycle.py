from datetime import UTC, datetime

import pytest

from corral.model import NodeState
from corral.sched import NEVER_FITS, NO_NODES, RESOURCES, Plan, Snapshot, get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def run(snap: Snapshot, policy: str = "default") -> Plan:
    return schedule(snap, get_policy(policy), NOW)


def where(plan: Plan) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    return {p.job_id: [(a.node, a.gpus) for a in p.allocations] for p in plan.placements}


PLACEMENT_CASES = [
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(4)],
            pending=[make_job("low").gpus(4).seq(1), make_job("high").gpus(4).priority(5).seq(2)],
        ),
        "default",
        {"high": [("n1", (0, 1, 2, 3))]},
        id="higher priority first",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(4)],
            pending=[make_job("second").gpus(4).seq(2), make_job("first").gpus(4).seq(1)],
        ),
        "default",
        {"first": [("n1", (0, 1, 2, 3))]},
        id="submit order breaks priority ties",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(4)],
            pending=[make_job("low").gpus(4).seq(1), make_job("high").gpus(4).priority(5).seq(2)],
        ),
        "fifo",
        {"low": [("n1", (0, 1, 2, 3))]},
        id="fifo ignores priority",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(4)],
            pending=[make_job("big").gpus(8).priority(9).seq(1), make_job("small").gpus(2).seq(2)],
        ),
        "default",
        {"small": [("n1", (0, 1))]},
        id="a later job is placed when an earlier one does not fit",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("h").gpus(8, "H100"), make_node("a").gpus(8, "A100")],
            pending=[make_job("j").gpus(2).types("A100", "H100")],
        ),
        "default",
        {"j": [("a", (0, 1))]},
        id="preferred GPU type first",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("h").gpus(8, "H100"), make_node("a").gpus(2, "A100")],
            live=[live_alloc("busy", "a", [0])],
            pending=[make_job("j").gpus(2).types("A100", "H100")],
        ),
        "default",
        {"j": [("h", (0, 1))]},
        id="falls back to the next acceptable type",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("big").gpus(8, "H100"), make_node("small").gpus(2, "A100")],
            pending=[make_job("j").gpus(2)],
        ),
        "default",
        {"j": [("small", (0, 1))]},
        id="any type takes the tightest fit",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
            live=[live_alloc("busy", "n2", range(5))],
            pending=[make_job("j").gpus(2)],
        ),
        "default",
        {"j": [("n2", (5, 6))]},
        id="best fit leaves the fewest free GPUs",
    ),
    pytest.param(
        snapshot(nodes=[make_node("b").gpus(8), make_node("a").gpus(8)], pending=[make_job("j").gpus(2)]),
        "default",
        {"j": [("a", (0, 1))]},
        id="best fit ties broken by node name",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(4)],
            live=[live_alloc("x", "n1", [0]), live_alloc("y", "n1", [2])],
            pending=[make_job("j").gpus(2)],
        ),
        "default",
        {"j": [("n1", (1, 3))]},
        id="lowest free GPU indices",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(8), make_node("n2").gpus(8)],
            live=[live_alloc("busy", "n2", range(5))],
            pending=[make_job("j").gpus(2)],
        ),
        "fifo",
        {"j": [("n1", (0, 1))]},
        id="fifo takes the first node by name",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("gpu").gpus(8).cpus(64), make_node("cpu").cpus(64)],
            pending=[make_job("j").cpus(8)],
        ),
        "default",
        {"j": [("cpu", ())]},
        id="cpu-only prefers nodes without GPUs",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(8).cpus(64), make_node("n2").gpus(8).cpus(64)],
            live=[live_alloc("busy", "n2", range(6))],
            pending=[make_job("j").cpus(8)],
        ),
        "default",
        {"j": [("n2", ())]},
        id="cpu-only then the node with the fewest free GPUs",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("gpu").gpus(8).cpus(64), make_node("cpu").cpus(4)],
            pending=[make_job("j").cpus(8)],
        ),
        "default",
        {"j": [("gpu", ())]},
        id="cpu-only needs its CPUs free",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2).cpus(8), make_node("n2").gpus(8).cpus(64)],
            pending=[make_job("j").gpus(2).cpus(16)],
        ),
        "default",
        {"j": [("n2", (0, 1))]},
        id="cpus must fit beside the GPUs",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2).memory("64GB"), make_node("n2").gpus(8).memory("1TB")],
            pending=[make_job("j").gpus(2).memory("128GB")],
        ),
        "default",
        {"j": [("n2", (0, 1))]},
        id="memory must fit beside the GPUs",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2).cpus(32), make_node("n2").gpus(8).cpus(32)],
            live=[live_alloc("busy", "n1", [], cpus=24)],
            pending=[make_job("j").gpus(2).cpus(16)],
        ),
        "default",
        {"j": [("n2", (0, 1))]},
        id="live allocations hold CPUs",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(8), make_node("b").gpus(8), make_node("c").gpus(8)],
            live=[live_alloc("x", "b", range(4)), live_alloc("y", "c", range(2))],
            pending=[make_job("gang").gpus(4).nodes(2)],
        ),
        "default",
        {"gang": [("b", (4, 5, 6, 7)), ("c", (2, 3, 4, 5))]},
        id="gang on distinct best-fit nodes with equal counts",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("h").gpus(4, "H100"), make_node("a").gpus(4, "A100")],
            pending=[make_job("gang").gpus(4).nodes(2)],
        ),
        "default",
        {},
        id="gang never mixes GPU types",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(8), make_node("b").gpus(8)],
            live=[live_alloc("x", "b", range(6))],
            pending=[make_job("gang").gpus(4).nodes(2).priority(9), make_job("j").gpus(8)],
        ),
        "default",
        {"j": [("a", tuple(range(8)))]},
        id="gang is all or nothing",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2)],
            pending=[make_job("x").gpus(0.5).seq(1), make_job("y").gpus(0.5).seq(2)],
        ),
        "default",
        {"x": [("n1", (0,))], "y": [("n1", (0,))]},
        id="fractional jobs share a GPU",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(3)],
            live=[live_alloc("x", "n1", [0], 0.5), live_alloc("y", "n1", [1], 0.75)],
            pending=[make_job("j").gpus(0.25)],
        ),
        "default",
        {"j": [("n1", (1,))]},
        id="fractional takes the tightest shared GPU",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2)],
            live=[live_alloc("x", "n1", [0], 0.75)],
            pending=[make_job("j").gpus(0.5)],
        ),
        "default",
        {"j": [("n1", (1,))]},
        id="fractions never exceed one GPU",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2)],
            live=[live_alloc("x", "n1", [0], 0.25)],
            pending=[make_job("j").gpus(1), make_job("k").gpus(1).seq(1)],
        ),
        "default",
        {"j": [("n1", (1,))]},
        id="whole-GPU jobs skip shared GPUs",
    ),
    pytest.param(
        snapshot(
            nodes=[
                make_node("a").gpus(8).state(NodeState.DRAINED),
                make_node("b").gpus(8).state(NodeState.NOT_READY),
                make_node("c").gpus(2),
            ],
            pending=[make_job("big").gpus(8).seq(1), make_job("small").gpus(2).seq(2)],
        ),
        "default",
        {"small": [("c", (0, 1))]},
        id="nodes that are not ready are skipped",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("n1").gpus(2)],
            live=[live_alloc("stopping", "n1", [0, 1])],
            pending=[make_job("j").gpus(1)],
        ),
        "default",
        {},
        id="GPUs of stopping jobs stay held",
    ),
]


@pytest.mark.parametrize(("snap", "policy", "expected"), PLACEMENT_CASES)
def test_placement(snap: Snapshot, policy: str, expected: dict[str, list[tuple[str, tuple[int, ...]]]]) -> None:
    plan = run(snap, policy)
    assert where(plan) == expected
    assert set(plan.reasons) == {j.id for j in snap.pending} - set(expected)


def test_placements_carry_type_fraction_and_host_reservations() -> None:
    plan = run(
        snapshot(
            nodes=[make_node("n1").gpus(2, "L4").cpus(8).memory("32GB")],
            pending=[make_job("j").gpus(0.5).cpus(2).memory("4GB")],
        )
    )
    (placement,) = plan.placements
    assert placement.gpu_type == "L4"
    (alloc,) = placement.allocations
    assert (alloc.gpu_fraction, alloc.cpus, alloc.memory_mb) == (0.5, 2.0, 4096)


def test_cpu_only_placement_has_no_gpu_type() -> None:
    plan = run(snapshot(nodes=[make_node("n1").cpus(8)], pending=[make_job("j").cpus(2)]))
    assert plan.placements[0].gpu_type is None
    assert plan.placements[0].allocations[0].gpus == ()


REASON_CASES = [
    pytest.param(
        snapshot(pending=[make_job("j").gpus(1)]),
        NO_NODES,
        "waiting for a node to join: none is registered yet; queue position 1 of 1",
        id="no nodes registered",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(8).state(NodeState.DRAINED), make_node("b").gpus(8).state(NodeState.NOT_READY)],
            pending=[make_job("j").gpus(1)],
        ),
        NO_NODES,
        "waiting for a node to become ready: none of the 2 registered nodes is ready (1 drained, 1 not ready); "
        "queue position 1 of 1",
        id="no node ready",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(8), make_node("b").gpus(8)],
            live=[live_alloc("x", "b", range(6))],
            pending=[make_job("j").gpus(4).nodes(2).types("H100")],
        ),
        RESOURCES,
        "waiting for 2 nodes with 4 free H100 GPUs each (1 node has that now); queue position 1 of 1",
        id="gang waits for a second node",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(8).cpus(16)],
            pending=[make_job("j").gpus(1).cpus(32).memory("64GB")],
        ),
        NEVER_FITS,
        "can never run on this cluster: needs 32 CPUs per node but the largest node with 1 GPU has 16 "
        "(cluster offers: 1 node × 8 H100:80GB (16 CPUs, 0MB memory))",
        id="never fits names what the cluster offers",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(8).state(NodeState.DRAINED), make_node("b").gpus(8)],
            live=[live_alloc("x", "b", [0])],
            pending=[make_job("j").gpus(8)],
        ),
        RESOURCES,
        "waiting for 1 node with 8 free GPUs (none has that now); 1 matching node is drained or not ready; "
        "queue position 1 of 1",
        id="names matching nodes that are not ready",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(1, "A100").cpus(8).memory("8GB")],
            live=[live_alloc("x", "a", [0], 0.75, cpus=4)],
            pending=[make_job("j").gpus(0.5).types("A100").cpus(2).memory("1GB")],
        ),
        RESOURCES,
        "waiting for 1 node with 0.5 of one free A100 GPU, 2 CPUs and 1GB memory (none has that now); "
        "queue position 1 of 1",
        id="fractional request",
    ),
    pytest.param(
        snapshot(
            nodes=[make_node("a").gpus(1).cpus(8).memory("8GB")],
            live=[live_alloc("x", "a", [], cpus=6)],
            pending=[make_job("j").cpus(4)],
        ),
        RESOURCES,
        "waiting for 1 node with 4 free CPUs (none has that now); queue position 1 of 1",
        id="cpu-only request",
    ),
]


@pytest.mark.parametrize(("snap", "code", "message"), REASON_CASES)
def test_reason(snap: Snapshot, code: str, message: str) -> None:
    plan = run(snap)
    assert plan.placements == ()
    ((job_id, reason),) = plan.reasons.items()
    assert (reason.code, reason.describe(plan.position(job_id))) == (code, message)


def test_queue_position_counts_waiting_jobs_in_policy_order() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(4)],
        pending=[
            make_job("placed").gpus(4).priority(9),
            make_job("c").gpus(2).seq(3),
            make_job("a").gpus(2).priority(1).seq(2),
            make_job("b").gpus(2).seq(1),
        ],
    )
    plan = run(snap)
    assert [p.job_id for p in plan.placements] == ["placed"]
    assert list(plan.reasons) == ["a", "b", "c"]
    assert [r.describe(plan.position(j)).rsplit("; ", 1)[1] for j, r in plan.reasons.items()] == [
        "queue position 1 of 3",
        "queue position 2 of 3",
        "queue position 3 of 3",
    ]


def test_every_pending_job_is_placed_or_has_a_reason() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8), make_node("n2").gpus(4, "A100")],
        pending=[make_job(f"j{i}").gpus(g).seq(i) for i, g in enumerate([8, 4, 2, 1, 0.5, 16, 3])],
    )
    plan = run(snap)
    placed = {p.job_id for p in plan.placements}
    assert placed.isdisjoint(plan.reasons)
    assert placed | set(plan.reasons) == {j.id for j in snap.pending}


def test_same_input_same_plan_whatever_the_input_order() -> None:
    nodes = [make_node(f"n{i}").gpus(4 + i % 3, "H100" if i % 2 else "A100").cpus(32) for i in range(6)]
    jobs = [make_job(f"j{i}").gpus([0.5, 1, 2, 4][i % 4]).nodes(1 + i % 2).priority(i % 3).seq(i) for i in range(12)]
    held = [live_alloc("x", "n1", [0]), live_alloc("y", "n2", [1], 0.5)]
    plan = run(snapshot(nodes=nodes, pending=jobs, live=held))
    assert plan == run(snapshot(nodes=nodes, pending=jobs, live=held))
    assert plan == run(snapshot(nodes=nodes[::-1], pending=jobs[::-1], live=held[::-1]))


def test_now_does_not_change_v1_plans() -> None:
    snap = snapshot(nodes=[make_node("n1").gpus(2)], pending=[make_job("j").gpus(1)])
    assert schedule(snap, get_policy("default"), NOW) == schedule(
        snap, get_policy("default"), datetime(2030, 1, 1, tzinfo=UTC)
    )


def test_jobs_waiting_for_the_same_thing_share_one_reason_and_keep_their_own_places() -> None:
    snap = snapshot(
        nodes=[make_node("n1").gpus(8)],
        live=[live_alloc("x", "n1", range(6))],
        pending=[
            *(make_job(f"w{i}").gpus(4).seq(i) for i in range(3)),
            make_job("huge").gpus(8).nodes(5).seq(9),
        ],
    )
    plan = run(snap)
    first, second, third = (plan.reasons[f"w{i}"] for i in range(3))
    assert first is second is third
    assert [plan.position(f"w{i}") for i in range(3)] == [(1, 4), (2, 4), (3, 4)]
    assert plan.reasons["huge"].code == NEVER_FITS and plan.position("huge") is None
    assert plan.position("not-pending") is None
