"""Back-off for replacing replicas that exit: growing waits, capped, forgotten once healthy."""

from corral.serve.restarts import HEALTHY_S, MAX_S, Backoff, ReplicaExit, delay_s, next_backoff

QUICK = ReplicaExit(replica="j-1", state="SUCCEEDED", exit_code=0, ran_s=0.1)


def test_each_round_with_exits_doubles_the_wait_up_to_the_maximum():
    assert [delay_s(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, MAX_S, MAX_S]
    state = Backoff()
    for _ in range(3):
        state = next_backoff(state, [QUICK], ready=False, now=100.0)
    assert state.failures == 3 and state.not_before == 104.0
    assert state.waiting(103.9) and not state.waiting(104.0)


def test_the_reason_says_what_exited_and_when_the_next_replica_starts():
    state = next_backoff(next_backoff(Backoff(), [QUICK], False, 0.0), [QUICK], False, 10.0)
    assert state.reason(10.5) == "replica j-1 exited with code 0 after 0.1 s (2 exits in a row); replacing it in 2 s"
    assert state.reason(13.0) == "replica j-1 exited with code 0 after 0.1 s (2 exits in a row)"
    assert Backoff().reason(0.0) is None
    lost = ReplicaExit(replica="j-2", state="FAILED", exit_code=None, ran_s=None)
    assert lost.describe() == "replica j-2 ended (FAILED) before it started"


def test_failures_are_forgotten_once_a_replica_stays_ready_long_enough():
    state = next_backoff(Backoff(), [QUICK], ready=False, now=0.0)
    state = next_backoff(state, [], ready=True, now=5.0)
    state = next_backoff(state, [], ready=False, now=30.0)  # it stopped being ready: start counting again
    state = next_backoff(state, [], ready=True, now=40.0)
    assert next_backoff(state, [], ready=True, now=40.0 + HEALTHY_S - 1).failures == 1
    assert next_backoff(state, [], ready=True, now=40.0 + HEALTHY_S) == Backoff()


def test_the_state_survives_a_round_trip_through_json():
    state = next_backoff(Backoff(), [QUICK], ready=False, now=7.0)
    state = next_backoff(state, [], ready=True, now=8.0)
    assert Backoff.from_json(state.to_json()) == state
    assert Backoff.from_json({}) == Backoff()
