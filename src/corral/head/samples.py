"""GPU readings from the agents' heartbeats, kept as bounded time series in memory."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from corral.api import GpuSample

DEFAULT_KEEP = 720  # an hour of readings at one every 5 s


@dataclass(frozen=True)
class Reading:
    at: datetime
    sample: GpuSample


class SampleStore:
    """The last ``keep`` readings of every (node, GPU)."""

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        self.keep = keep
        self._series: dict[tuple[str, int], deque[Reading]] = {}
        self._lock = threading.Lock()

    def record(self, node: str, at: datetime, samples: list[GpuSample]) -> None:
        with self._lock:
            for sample in samples:
                series = self._series.setdefault((node, sample.index), deque(maxlen=self.keep))
                series.append(Reading(at, sample))

    def latest(self) -> dict[tuple[str, int], Reading]:
        with self._lock:
            return {key: series[-1] for key, series in self._series.items() if series}

    def series(self, node: str, index: int) -> list[Reading]:
        with self._lock:
            return list(self._series.get((node, index), ()))
