"""GPU prices over time: a hold costs what GPUs cost while it held them."""

from datetime import UTC, datetime, timedelta

import pytest

from corral.head.services.accounting.prices import PriceBook, case_only_matches, load_prices, price_of, record_prices
from corral.head.store.db import Database, sqlite_url
from corral.head.store.tables import PriceRow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def hours(n: float) -> timedelta:
    return timedelta(hours=n)


def test_a_type_is_priced_by_its_exact_name_and_unpriced_types_cost_nothing():
    assert price_of({"H100": 2.5}, "H100") == 2.5
    assert price_of({"H100": 2.5, "h100": 4.0}, "h100") == 4.0
    assert price_of({"H100": 2.5}, "h100") == 0.0  # as a job's gpu_type: another case is another type
    assert price_of({"H100": 2.5}, "A100") == 0.0


def test_only_names_that_differ_from_a_gpu_type_in_case_alone_are_found():
    prices = {"h100": 1.0, "A100": 1.0, "l4": 1.0, "B200": 1.0}
    assert case_only_matches(prices, {"H100", "A100", "l4", "L4"}) == {"h100": "H100"}
    assert case_only_matches(prices, set()) == {}


def test_each_stretch_of_a_hold_costs_what_a_gpu_hour_cost_then():
    book = PriceBook(((T0, {"H100": 2.0}), (T0 + hours(2), {"H100": 3.0}), (T0 + hours(3), {"A100": 1.0})))
    # One hour before the first change counts at the first prices (they apply from the beginning).
    assert book.cost("H100", T0 - hours(1), T0 + hours(1)) == pytest.approx(4.0)
    # 1 h at 2.0, 1 h at 3.0, then 1 h at no price for H100.
    assert book.cost("H100", T0 + hours(1), T0 + hours(4)) == pytest.approx(5.0)
    assert book.cost("A100", T0 + hours(1), T0 + hours(4)) == pytest.approx(1.0)
    assert book.cost("H100", T0 + hours(2), T0 + hours(2.5), fraction=0.5) == pytest.approx(0.75)
    assert book.cost("H100", T0 + hours(3), T0 + hours(2)) == 0.0  # an empty stretch


def test_prices_are_recorded_only_when_they_change_and_read_back_in_order(tmp_path):
    db = Database(sqlite_url(tmp_path / "corral.db"))
    db.migrate()
    try:
        with db.write() as session:
            assert load_prices(session, {"H100": 2.0}).changes == ((datetime.min.replace(tzinfo=UTC), {"H100": 2.0}),)
            assert record_prices(session, {"H100": 2.0}, T0)
            assert not record_prices(session, {"H100": 2.0}, T0 + hours(1))  # the same: nothing new
            assert record_prices(session, {"H100": 3.0}, T0 + hours(2))
            assert record_prices(session, {}, T0 + hours(3))  # no prices at all is a change too
        with db.read() as session:
            assert session.query(PriceRow).count() == 3
            book = load_prices(session, {"H100": 99.0})  # what is recorded wins over this head's own
            assert [at for at, _ in book.changes] == [T0, T0 + hours(2), T0 + hours(3)]
            assert book.cost("H100", T0, T0 + hours(4)) == pytest.approx(2 * 2.0 + 3.0)
    finally:
        db.close()
