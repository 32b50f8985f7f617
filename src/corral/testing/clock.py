"""A clock that moves only when told to, for tests of anything that reads the time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2025, 1, 1, tzinfo=UTC)


class FakeClock:
    """Implements ``corral.clock.Clock``; ``advance(seconds)`` moves both wall and monotonic time."""

    def __init__(self, start: datetime = DEFAULT_START, monotonic_start: float = 1000.0) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._now = start.astimezone(UTC)
        self._monotonic = monotonic_start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` (never back); returns the new wall time."""
        if seconds < 0:
            raise ValueError(f"a clock never goes back; got {seconds}")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            self._monotonic += seconds
            return self._now
