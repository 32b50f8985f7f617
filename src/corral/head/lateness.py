"""How late the head itself runs: a node's silence counts only while the head could have heard it.

A probe on the event loop asks to wake every ``TICK_S`` and notes each time it woke late. While the
event loop is late, nothing the agents send is read (requests wait in the socket's queue), whatever
holds it: a long computation holding the interpreter, a busy machine, a pause of the process. The
liveness check subtracts those spans from a node's silence (``deaf_within``), so a node is declared
lost for a silence of its agent, never for one of the head.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

TICK_S = 0.1
TOLERANCE_S = 0.05  # lateness below this is the event loop's ordinary jitter, not a stall
KEEP_S = 3600.0  # spans older than this are forgotten (no node timeout is that long)


class Lateness:
    """Spans of monotonic time during which the head's event loop did not run."""

    def __init__(self) -> None:
        self._spans: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def record(self, start: float, end: float) -> None:
        if end <= start:
            return
        with self._lock:
            self._spans.append((start, end))
            while self._spans and self._spans[0][1] < end - KEEP_S:
                self._spans.popleft()

    def deaf_within(self, seconds: float, now: float | None = None) -> float:
        """How many of the last ``seconds`` seconds (up to ``now``, monotonic) the head did not run."""
        end = time.monotonic() if now is None else now
        start = end - seconds
        with self._lock:
            spans = list(self._spans)
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)


async def probe(lateness: Lateness, tick_s: float = TICK_S) -> None:
    """Note every span the event loop woke late by more than the tolerance; runs until cancelled."""
    while True:
        due = time.monotonic() + tick_s
        await asyncio.sleep(tick_s)
        woke = time.monotonic()
        if woke - due > TOLERANCE_S:
            lateness.record(due, woke)
