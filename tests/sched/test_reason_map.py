"""``Reasons``: a mapping in queue order whose rest is kept per group, indexed only when looked up."""

from __future__ import annotations

import pytest

from corral.sched.plan import Reason
from corral.sched.reason_map import Reasons

FIRST = Reason("RESOURCES", "first", True)
ONE, TWO = Reason("RESOURCES", "group one", True), Reason("QUOTA", "group two")


def reasons() -> Reasons:
    return Reasons({"a": FIRST, "b": FIRST}, ["c", "d", "e"], [1, 2, 1], {1: ONE, 2: TWO})


def test_it_reads_as_the_dict_of_every_job_in_queue_order() -> None:
    expected = {"a": FIRST, "b": FIRST, "c": ONE, "d": TWO, "e": ONE}
    got = reasons()
    assert list(got) == list(expected) and list(got.items()) == list(expected.items())
    assert got == expected and dict(got) == expected and {**got} == expected
    assert (len(got), got["d"], got.get("x"), "e" in got, "x" in got) == (5, TWO, None, True, False)
    with pytest.raises(KeyError):
        got["x"]


def test_going_through_it_in_order_builds_no_index() -> None:
    got = reasons()
    assert [job for job, _ in got.items()] == ["a", "b", "c", "d", "e"]
    assert got._index is None
    assert got["c"] == ONE and got._index == {"c": 1, "d": 2, "e": 1}


def test_only_a_job_looked_at_one_by_one_is_given_another_reason() -> None:
    got, other = reasons(), Reason("RESERVED", "reserved", True)
    got.replace("b", other)
    assert got["b"] == other and list(got) == ["a", "b", "c", "d", "e"]
    with pytest.raises(KeyError):
        got.replace("c", other)
