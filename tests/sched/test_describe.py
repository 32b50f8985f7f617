"""Numbers in messages read as people write them."""

from __future__ import annotations

from corral.sched import describe


def test_numbers_are_whole_where_they_are_and_never_in_exponent_form() -> None:
    assert [describe.number(v) for v in (4.0, 0.5, 1_000_000, 1_234_567.0, 0.25)] == [
        "4",
        "0.5",
        "1000000",
        "1234567",
        "0.25",
    ]
    assert describe.plural(1_000_000, "node") == "1000000 nodes" and describe.plural(1, "node") == "1 node"
