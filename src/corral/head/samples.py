"""GPU readings from the agents' heartbeats, kept as bounded time series in memory.

A head of 2,000 nodes × 8 GPUs keeping 720 readings of each GPU holds over ten million of them. As
Python objects they would take gigabytes and make every full garbage collection pause the head
for seconds, so each (node, GPU) series is two flat arrays in a ring (times as integer
microseconds, the readings as floats: 56 bytes a reading); ``Reading`` values are made only when read.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from corral.api import GpuSample

DEFAULT_KEEP = 720  # 24 minutes of readings at one every 2 s (the default heartbeat interval)

_FIELDS = 6  # utilization, memory_used_mb, temperature_c, power_w, ecc_uncorrectable, xid_errors
_AWARE_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class Reading:
    at: datetime
    sample: GpuSample


class _Series:
    """One GPU's readings in a ring of at most ``keep``, oldest first from ``start``."""

    __slots__ = ("count", "start", "times", "values")

    def __init__(self) -> None:
        self.times = array("q")
        self.values = array("d")
        self.start = 0
        self.count = 0

    def append(self, micros: int, values: tuple[float, ...], keep: int) -> None:
        if self.count < keep:
            self.times.append(micros)
            self.values.extend(values)
            self.count += 1
            return
        at = self.start
        self.times[at] = micros
        self.values[at * _FIELDS : (at + 1) * _FIELDS] = array("d", values)
        self.start = (at + 1) % self.count

    def reading(self, slot: int, index: int, epoch: datetime) -> Reading:
        util, memory, temperature, power, ecc, xid = self.values[slot * _FIELDS : (slot + 1) * _FIELDS]
        sample = GpuSample.model_construct(
            index=index,
            utilization=util,
            memory_used_mb=int(memory),
            temperature_c=temperature,
            power_w=power,
            ecc_uncorrectable=int(ecc),
            xid_errors=int(xid),
        )
        return Reading(epoch + self.times[slot] * _MICROSECOND, sample)

    def slots(self) -> list[int]:
        """Slot numbers from the oldest reading to the newest."""
        return [(self.start + k) % self.count for k in range(self.count)]


class SampleStore:
    """The last ``keep`` readings of every (node, GPU)."""

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        self.keep = keep
        self._series: dict[tuple[str, int], _Series] = {}
        self._epoch: datetime | None = None  # aware or naive, as the first reading's time
        self._lock = threading.Lock()

    def record(self, node: str, at: datetime, samples: list[GpuSample]) -> None:
        with self._lock:
            if self._epoch is None:
                self._epoch = _NAIVE_EPOCH if at.tzinfo is None else _AWARE_EPOCH
            since = at - self._epoch
            micros = (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds
            for sample in samples:
                series = self._series.get((node, sample.index))
                if series is None:
                    series = self._series[(node, sample.index)] = _Series()
                values = (
                    sample.utilization,
                    float(sample.memory_used_mb),
                    sample.temperature_c,
                    sample.power_w,
                    float(sample.ecc_uncorrectable),
                    float(sample.xid_errors),
                )
                series.append(micros, values, self.keep)

    def latest(self) -> dict[tuple[str, int], Reading]:
        with self._lock:
            epoch = self._epoch
            if epoch is None:
                return {}
            return {
                key: series.reading((series.start - 1) % series.count, key[1], epoch)
                for key, series in self._series.items()
                if series.count
            }

    def series(self, node: str, index: int) -> list[Reading]:
        with self._lock:
            found, epoch = self._series.get((node, index)), self._epoch
            if found is None or epoch is None:
                return []
            return [found.reading(slot, index, epoch) for slot in found.slots()]
