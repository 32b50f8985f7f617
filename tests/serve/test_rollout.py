"""Rollout: replicas to start, drain and stop for the desired count and revision."""

from hypothesis import given
from hypothesis import strategies as st

from corral.serve.rollout import Phase, ReplicaState, plan_rollout


def replica(id_, revision=1, ready=True, phase=Phase.ACTIVE, age=10.0, draining_for=0.0, inflight=0):
    return ReplicaState(
        id=id_, revision=revision, phase=phase, ready=ready, age_s=age, draining_for_s=draining_for, inflight=inflight
    )


def test_missing_replicas_are_started():
    plan = plan_rollout(3, 1, [replica("a")], drain_s=2, drain_max_s=30)
    assert plan.start == 2 and not plan.drain


def test_surplus_replicas_are_drained_not_ready_and_youngest_first():
    replicas = [replica("old", age=100), replica("young", age=1), replica("starting", ready=False, age=50)]
    assert plan_rollout(1, 1, replicas, drain_s=2, drain_max_s=30).drain == ("starting", "young")


def test_drained_replicas_stop_after_the_drain_period_and_ended_ones_are_forgotten():
    replicas = [
        replica("a"),
        replica("leaving", phase=Phase.DRAINING, draining_for=1.0),
        replica("left", phase=Phase.DRAINING, draining_for=2.5),
        replica("dead", phase=Phase.ENDED),
    ]
    plan = plan_rollout(1, 1, replicas, drain_s=2, drain_max_s=30)
    assert plan.stop == ("left",) and plan.forget == ("dead",) and plan.start == 0


def test_a_drained_replica_is_stopped_once_its_requests_are_over_or_at_the_maximum():
    replicas = [
        replica("a"),
        replica("busy", phase=Phase.DRAINING, draining_for=10.0, inflight=1),
        replica("done", phase=Phase.DRAINING, draining_for=10.0, inflight=0),
        replica("fresh", phase=Phase.DRAINING, draining_for=1.0, inflight=0),
        replica("stuck", phase=Phase.DRAINING, draining_for=30.0, inflight=3),
    ]
    plan = plan_rollout(1, 1, replicas, drain_s=2, drain_max_s=30)
    assert plan.stop == ("done", "stuck")


def test_an_update_surges_one_replica_and_drains_only_once_it_is_ready():
    old = [replica("o1", age=30), replica("o2", age=20)]
    first = plan_rollout(2, 2, old, drain_s=2, drain_max_s=30)
    assert first.start == 1 and not first.drain
    pending = [*old, replica("n1", revision=2, ready=False, age=0)]
    assert plan_rollout(2, 2, pending, drain_s=2, drain_max_s=30).empty
    ready = [*old, replica("n1", revision=2, ready=True, age=1)]
    step = plan_rollout(2, 2, ready, drain_s=2, drain_max_s=30)
    assert step.drain == ("o1",)  # the oldest leaves
    assert step.start == 1  # and the next new replica takes its place


def test_an_old_replica_that_serves_nothing_leaves_at_once():
    plan = plan_rollout(1, 2, [replica("o1", ready=False), replica("o2")], drain_s=2, drain_max_s=30)
    assert plan.drain == ("o1",)


def test_scaling_to_zero_drains_everything():
    plan = plan_rollout(0, 1, [replica("a"), replica("b", revision=0)], drain_s=2, drain_max_s=30)
    assert set(plan.drain) == {"a", "b"} and plan.start == 0


states = st.builds(
    replica,
    id_=st.uuids().map(str),
    revision=st.integers(1, 3),
    ready=st.booleans(),
    phase=st.sampled_from(list(Phase)),
    age=st.floats(0, 100),
    draining_for=st.floats(0, 10),
    inflight=st.integers(0, 3),
)


@given(st.integers(0, 6), st.integers(1, 3), st.lists(states, max_size=10))
def test_never_more_than_one_replica_beyond_the_desired_count_and_never_fewer_ready(desired, revision, replicas):
    plan = plan_rollout(desired, revision, replicas, drain_s=2, drain_max_s=30)
    active = [r for r in replicas if r.phase is Phase.ACTIVE]
    staying = [r for r in active if r.id not in plan.drain]
    drained = set(plan.drain)
    assert drained <= {r.id for r in active}
    assert set(plan.stop) <= {r.id for r in replicas if r.phase is Phase.DRAINING}
    assert not {r.id for r in replicas if r.inflight and r.draining_for_s < 30} & set(plan.stop)
    assert set(plan.forget) == {r.id for r in replicas if r.phase is Phase.ENDED}
    current = [r for r in staying if r.revision == revision]
    total_after = len(staying) + plan.start
    updating = any(r.revision != revision for r in staying)
    if not updating:
        assert len(current) + plan.start == desired  # nothing missing, nothing beyond
    else:
        assert total_after <= max(desired + 1, len(staying))  # a surge of one during an update
    ready_before = sum(1 for r in active if r.ready)
    ready_after = sum(1 for r in staying if r.ready)
    assert ready_after >= min(ready_before, desired)  # an update never drops ready capacity below desired
