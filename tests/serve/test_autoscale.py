"""The autoscaler: a pure function of (load window, replicas, policy, state, now)."""

from hypothesis import given
from hypothesis import strategies as st

from corral.serve.autoscale import AutoscalePolicy, AutoscaleState, LoadSample, decide_replicas

POLICY = AutoscalePolicy(min_replicas=1, max_replicas=5, target_inflight=2, up_delay_s=3, down_delay_s=10)


def window(inflight: float, rps: float = 0.0) -> list[LoadSample]:
    return [LoadSample(at=0.0, inflight=inflight, rps=rps)]


def run(samples, replicas, policy, times):
    """Feed the same window at each time; the replica counts decided."""
    state, out = AutoscaleState(), []
    for now in times:
        replicas, state = decide_replicas(samples, replicas, policy, state, now)
        out.append(replicas)
    return out


def test_sustained_overload_scales_up_after_the_up_delay():
    assert run(window(7), 1, POLICY, [0, 1, 2, 2.9, 3.0]) == [1, 1, 1, 1, 4]


def test_a_short_burst_does_not_scale():
    state = AutoscaleState()
    replicas, state = decide_replicas(window(8), 1, POLICY, state, 0)
    replicas, state = decide_replicas(window(1), replicas, POLICY, state, 1)
    replicas, state = decide_replicas(window(8), replicas, POLICY, state, 2.5)
    assert replicas == 1 and state.since == 2.5  # the overload clock started again


def test_underload_scales_down_after_the_down_delay_to_min():
    assert run(window(0), 4, POLICY, [0, 5, 9.9, 10]) == [4, 4, 4, 1]


def test_never_beyond_max():
    assert run(window(100), 1, POLICY, [0, 3]) == [1, 5]


def test_a_request_wakes_a_sleeping_service_at_once():
    sleepy = AutoscalePolicy(min_replicas=0, max_replicas=3, target_inflight=4, up_delay_s=30, down_delay_s=5)
    replicas, state = decide_replicas(window(1), 0, sleepy, AutoscaleState(), 0)
    assert replicas == 1 and state == AutoscaleState()


def test_an_idle_service_with_min_zero_sleeps_after_the_down_delay():
    sleepy = AutoscalePolicy(min_replicas=0, max_replicas=3, target_inflight=4, down_delay_s=5)
    assert run(window(0), 1, sleepy, [0, 4, 5]) == [1, 1, 0]


def test_light_load_keeps_one_replica_for_a_service_that_may_sleep():
    sleepy = AutoscalePolicy(min_replicas=0, max_replicas=3, target_inflight=4, down_delay_s=1)
    assert run(window(0.5), 1, sleepy, [0, 5]) == [1, 1]


def test_requests_per_second_as_the_target():
    by_rps = AutoscalePolicy(min_replicas=1, max_replicas=10, target_rps=100, up_delay_s=0)
    replicas, _ = decide_replicas(window(0, rps=450), 1, by_rps, AutoscaleState(), 0)
    assert replicas == 5


def test_new_bounds_apply_at_once():
    pinned = AutoscalePolicy(min_replicas=3, max_replicas=3)
    assert decide_replicas(window(0), 1, pinned, AutoscaleState(direction=-1, since=0), 1) == (3, AutoscaleState())


def test_state_survives_a_round_trip_through_json():
    state = AutoscaleState(direction=1, since=12.5)
    assert AutoscaleState.from_json(state.to_json()) == state


policies = st.builds(
    AutoscalePolicy,
    min_replicas=st.integers(0, 4),
    max_replicas=st.integers(4, 10),
    target_inflight=st.one_of(st.none(), st.floats(0.5, 10)),
    up_delay_s=st.floats(0, 10),
    down_delay_s=st.floats(0, 60),
)
samples = st.lists(
    st.builds(LoadSample, at=st.floats(0, 100), inflight=st.floats(0, 100), rps=st.floats(0, 1000)), max_size=5
)


@given(samples, st.integers(0, 12), policies, st.integers(-1, 1), st.floats(0, 100), st.floats(0, 100))
def test_decisions_stay_in_bounds_and_are_deterministic(window_, replicas, policy, direction, since, now):
    state = AutoscaleState(direction=direction, since=min(since, now))
    decided, new_state = decide_replicas(window_, replicas, policy, state, now)
    assert policy.min_replicas <= decided <= policy.max_replicas
    assert (decided, new_state) == decide_replicas(window_, replicas, policy, state, now)
    if decided != replicas:
        assert new_state == AutoscaleState()  # a change made starts no clock
    if new_state.direction:  # a change waits: it points the way the load asks for
        assert decided == replicas
        assert new_state.since <= now
