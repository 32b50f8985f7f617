"""``Reasons``: a mapping in queue order whose jobs share their group's reason, indexed only when looked up."""

from __future__ import annotations

import pytest

from corral.sched.plan import Reason
from corral.sched.reason_map import Reasons

FIRST, SECOND = Reason("RESOURCES", "first", True), Reason("RESERVED", "second", True)
ONE, TWO = Reason("RESOURCES", "group one", True), Reason("QUOTA", "group two")


def reasons() -> Reasons:
    # a and e were looked at one by one; the others wait as their groups do, b and c before e
    ids, numbers = ["a", "b", "c", "e", "d", "f"], [-1, 1, 2, -2, 2, 1]
    return Reasons(ids, numbers, {-1: FIRST, -2: SECOND, 1: ONE, 2: TWO}, {"a": -1, "e": -2})


def test_it_reads_as_the_dict_of_every_job_in_queue_order() -> None:
    expected = {"a": FIRST, "b": ONE, "c": TWO, "e": SECOND, "d": TWO, "f": ONE}
    got = reasons()
    assert list(got) == list(expected) and list(got.items()) == list(expected.items())
    assert got == expected and dict(got) == expected and {**got} == expected
    assert (len(got), got["d"], got.get("x"), "e" in got, "x" in got) == (6, TWO, None, True, False)
    with pytest.raises(KeyError):
        got["x"]


def test_going_through_it_in_order_builds_no_index() -> None:
    got = reasons()
    assert [job for job, _ in got.items()] == ["a", "b", "c", "e", "d", "f"]
    assert (got["a"], got["e"], "a" in got) == (FIRST, SECOND, True) and got._index is None
    assert got["c"] == TWO and got._index == {"a": -1, "b": 1, "c": 2, "e": -2, "d": 2, "f": 1}


def test_only_a_job_looked_at_one_by_one_is_given_another_reason() -> None:
    got, other = reasons(), Reason("RESERVED", "reserved", True)
    got.replace("e", other)
    assert (got["e"], got["a"], got["b"]) == (other, FIRST, ONE) and list(got) == ["a", "b", "c", "e", "d", "f"]
    with pytest.raises(KeyError):
        got.replace("c", other)


def test_of_a_mapping_gives_each_job_its_own() -> None:
    got = Reasons.of({"a": FIRST, "b": ONE})
    got.replace("b", TWO)
    assert list(got.items()) == [("a", FIRST), ("b", TWO)] and got.ids() == ("a", "b")
