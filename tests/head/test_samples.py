"""The head's in-memory GPU readings: bounded rings that read back exactly, at no cost to the collector."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta

from corral.api import GpuSample
from corral.head.samples import SampleStore

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def sample(index: int, step: int) -> GpuSample:
    return GpuSample(
        index=index,
        utilization=step % 101,
        memory_used_mb=1000 + step,
        temperature_c=40.5 + step / 10,
        power_w=123.456 + step,
        ecc_uncorrectable=step % 3,
        xid_errors=step % 2,
    )


def test_a_series_keeps_the_newest_readings_in_order_and_reads_them_back_exactly():
    store = SampleStore(keep=3)
    for step in range(5):
        store.record("n1", T0 + timedelta(seconds=step, microseconds=7), [sample(0, step), sample(1, step)])
    series = store.series("n1", 0)
    assert [r.at for r in series] == [T0 + timedelta(seconds=s, microseconds=7) for s in (2, 3, 4)]
    assert [r.sample for r in series] == [sample(0, s) for s in (2, 3, 4)]
    latest = store.latest()
    assert set(latest) == {("n1", 0), ("n1", 1)}
    assert latest[("n1", 1)].sample == sample(1, 4) and latest[("n1", 1)].at == T0 + timedelta(
        seconds=4, microseconds=7
    )


def test_before_the_ring_is_full_and_for_unknown_gpus():
    store = SampleStore(keep=10)
    assert store.latest() == {} and store.series("n1", 0) == []
    store.record("n1", T0, [sample(0, 1)])
    store.record("n1", T0 + timedelta(seconds=5), [sample(0, 2)])
    assert [r.sample.memory_used_mb for r in store.series("n1", 0)] == [1001, 1002]
    assert store.latest()[("n1", 0)].sample == sample(0, 2)
    assert store.series("n2", 0) == []


def test_naive_times_read_back_naive():
    store = SampleStore(keep=2)
    naive = datetime(2026, 3, 1, 12, 0, 0, 5)
    store.record("n1", naive, [sample(0, 0)])
    assert store.series("n1", 0)[0].at == naive


def test_readings_add_no_objects_for_the_garbage_collector_to_walk():
    store = SampleStore(keep=720)
    store.record("n1", T0, [sample(i, 0) for i in range(8)])
    gc.collect()
    before = len(gc.get_objects())
    for step in range(1, 2000):
        store.record("n1", T0 + timedelta(seconds=2 * step), [sample(i, step) for i in range(8)])
    gc.collect()
    assert len(gc.get_objects()) - before < 50  # 16,000 readings kept as flat arrays
