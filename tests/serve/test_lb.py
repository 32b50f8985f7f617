"""Least outstanding requests with power-of-two choices."""

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from corral.serve.lb import ReplicaView, RequestView, choose_replica

REQUEST = RequestView(service="echo")


def test_no_replica_no_choice():
    assert choose_replica(REQUEST, [], random.Random(1)) is None


def test_the_only_replica_gets_it():
    assert choose_replica(REQUEST, [ReplicaView("a", 100)], random.Random(1)) == "a"


def test_of_two_the_less_busy_one_always_wins():
    replicas = [ReplicaView("busy", 5), ReplicaView("idle", 0)]
    rng = random.Random(7)
    assert {choose_replica(REQUEST, replicas, rng) for _ in range(50)} == {"idle"}


def test_an_excluded_replica_is_never_chosen():
    replicas = [ReplicaView("a", 0), ReplicaView("b", 9)]
    retry = RequestView(service="echo", exclude=frozenset({"a"}))
    assert choose_replica(retry, replicas, random.Random(3)) == "b"
    assert choose_replica(RequestView("echo", exclude=frozenset({"a", "b"})), replicas, random.Random(3)) is None


def test_the_most_loaded_replica_is_never_chosen_among_many():
    replicas = [ReplicaView(str(i), i) for i in range(6)]
    rng = random.Random(11)
    chosen = Counter(choose_replica(REQUEST, replicas, rng) for _ in range(3000))
    assert "5" not in chosen
    assert chosen["0"] > chosen["4"]  # the idlest wins most often


def test_equal_load_spreads_evenly():
    replicas = [ReplicaView(name, 0) for name in "abc"]
    rng = random.Random(5)
    chosen = Counter(choose_replica(REQUEST, replicas, rng) for _ in range(3000))
    assert all(800 < chosen[name] < 1200 for name in "abc"), chosen


loads = st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=12)


@given(loads, st.integers(min_value=0, max_value=2**32), st.sets(st.integers(min_value=0, max_value=11)))
def test_the_choice_is_an_allowed_replica_and_the_same_for_the_same_seed(outstanding, seed, excluded):
    replicas = [ReplicaView(f"r{i}", n) for i, n in enumerate(outstanding)]
    request = RequestView(service="s", exclude=frozenset(f"r{i}" for i in excluded))
    first = choose_replica(request, replicas, random.Random(seed))
    assert first == choose_replica(request, replicas, random.Random(seed))
    allowed = [r for r in replicas if r.id not in request.exclude]
    if not allowed:
        assert first is None
        return
    assert first in {r.id for r in allowed}
    if len(allowed) >= 2:  # it beat at least one other replica
        load = {r.id: r.outstanding for r in replicas}
        assert load[first] <= max(r.outstanding for r in allowed)
        assert sum(1 for r in allowed if r.outstanding >= load[first]) >= 2
