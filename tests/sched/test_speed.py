"""Heterogeneous GPUs: a job waits for a faster type it prefers when that finishes it sooner."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from corral.sched import FASTER_GPU, get_policy, schedule
from corral.testing import live_alloc, make_job, make_node, running_job, snapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)
DEFAULT = get_policy("default")
SPEEDS = {"H100": 1.0, "L4": 0.2}


def cluster_with_busy_h100(frees_in_s: float, speeds=SPEEDS):
    nodes = [make_node("h").gpus(8, "H100"), make_node("l").gpus(8, "L4")]
    busy = running_job("busy", NOW, ran_s=1000, time_limit_s=1000 + frees_in_s)
    job = make_job("j").gpus(8).types("H100", "L4").time_limit(3600)
    snap = snapshot(nodes, pending=[job], live=[live_alloc("busy", "h", range(8))], running=[busy])
    return replace(snap, gpu_speed=speeds)


def test_the_job_waits_for_the_faster_type_when_it_frees_up_soon():
    plan = schedule(cluster_with_busy_h100(frees_in_s=100), DEFAULT, NOW)
    assert plan.placements == ()
    reason = plan.reasons["j"]
    assert reason.code == FASTER_GPU
    assert reason.message.startswith("waiting for H100 GPUs, expected to free up at 2026-01-01 00:01:40 UTC (in 1m40s)")
    assert reason.message.endswith("the job finishes sooner there than on L4 now")
    assert reason.expected_start == datetime(2026, 1, 1, 0, 1, 40, tzinfo=UTC)  # shown as the job's expected start


def test_the_job_runs_on_the_slower_type_when_waiting_would_finish_later():
    plan = schedule(cluster_with_busy_h100(frees_in_s=20_000), DEFAULT, NOW)  # 20,000 + 3,600 > 3,600 / 0.2
    assert [(p.job_id, p.gpu_type) for p in plan.placements] == [("j", "L4")]


def test_without_a_speed_table_or_a_run_time_the_job_takes_what_fits_now():
    plan = schedule(cluster_with_busy_h100(frees_in_s=100, speeds={}), DEFAULT, NOW)
    assert [p.gpu_type for p in plan.placements] == ["L4"]
    snap = cluster_with_busy_h100(frees_in_s=100)
    no_limit = replace(snap, pending=(replace(snap.pending[0], time_limit_s=None),))
    assert [p.gpu_type for p in schedule(no_limit, DEFAULT, NOW).placements] == ["L4"]
