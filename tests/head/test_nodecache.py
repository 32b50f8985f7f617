"""The head's cache of nodes as scheduler values: re-read where a node registered again, reused otherwise."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from corral.head.store.tables import NodeRow
from corral.model import NodeState


def load(head, heard_since=None):
    with head.rt.read() as session:
        return {n.name: n for n in head.rt.node_models.load(session, heard_since=heard_since)}


def test_unchanged_nodes_are_the_same_values_between_reads(head):
    head.register("n1", gpus=4)
    head.register("n2", gpus=2, gpu_type="A100", labels={"rack": "r1"})
    first, second = load(head), load(head)
    assert first["n1"] is second["n1"] and first["n2"] is second["n2"]
    assert [g.type for g in second["n2"].gpus] == ["A100", "A100"]
    assert second["n2"].labels == {"rack": "r1"}


def test_a_node_that_registers_again_is_read_again(head):
    head.register("n1", gpus=4, gpu_type="H100")
    before = load(head)["n1"]
    head.register("n1", gpus=2, gpu_type="L4", labels={"rack": "r9"}, container_runtime="podman")
    after = load(head)["n1"]
    assert [g.type for g in after.gpus] == ["L4", "L4"]
    assert after.labels == {"rack": "r9"} and after.container_runtime == "podman"
    assert [g.type for g in before.gpus] == ["H100"] * 4


def test_state_health_and_silence_are_read_every_time(head, clock):
    head.register("n1", gpus=4)
    fresh = clock.now() - timedelta(seconds=30)
    assert load(head, fresh)["n1"].state is NodeState.READY
    with head.rt.write() as session:
        session.execute(update(NodeRow).where(NodeRow.name == "n1").values(unhealthy_gpus={"1": "ECC errors"}))
    usable = load(head, fresh)["n1"]
    assert [g.index for g in usable.gpus] == [0, 2, 3]
    assert [g.index for g in load(head)["n1"].gpus] == [0, 1, 2, 3]  # as registered, without heard_since
    with head.rt.write() as session:
        session.execute(update(NodeRow).where(NodeRow.name == "n1").values(health_problem="disk full"))
    assert load(head, fresh)["n1"].state is NodeState.NOT_READY
    assert load(head)["n1"].state is NodeState.READY
    with head.rt.write() as session:
        session.execute(update(NodeRow).where(NodeRow.name == "n1").values(health_problem=""))
    assert load(head, clock.now() + timedelta(seconds=1))["n1"].state is NodeState.NOT_READY  # silent since
