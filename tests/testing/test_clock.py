from datetime import UTC, datetime, timedelta, timezone

import pytest

from corral.clock import Clock
from corral.testing import FakeClock


def test_a_fake_clock_stands_still_until_advanced():
    clock = FakeClock()
    start, tick = clock.now(), clock.monotonic()
    assert clock.now() == start
    assert clock.monotonic() == tick
    assert clock.advance(2.5) == start + timedelta(seconds=2.5)
    assert clock.now() == start + timedelta(seconds=2.5)
    assert clock.monotonic() == tick + 2.5


def test_a_fake_clock_is_timezone_aware_utc():
    clock = FakeClock(datetime(2030, 6, 1, 12, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now().tzinfo is UTC
    assert clock.now() == datetime(2030, 6, 1, 10, tzinfo=UTC)


def test_a_fake_clock_refuses_naive_starts_and_going_back():
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="never goes back"):
        FakeClock().advance(-1)


def test_a_fake_clock_is_a_clock():
    clock: Clock = FakeClock()
    assert clock.now() <= clock.now()
