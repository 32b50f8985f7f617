"""What a simulation run measures: JCT percentiles, waiting, makespan, utilization, fairness, cost, energy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from corral.sim.costs import GroupRates, spend
from corral.sim.fairness import team_fairness
from corral.sim.result import SimResult


@dataclass(frozen=True)
class Summary:
    """One policy's figures, in seconds; ``utilization`` = busy GPU-seconds / (GPUs × makespan).

    ``jain_fairness`` is over the teams' average bounded slowdowns (``corral.sim.fairness``);
    ``cost`` is every GPU for the makespan and ``busy_cost`` the busy GPU-hours alone, at each node
    group's price per GPU-hour; ``energy_kwh`` counts busy and idle GPUs (``corral.sim.costs``).
    """

    jobs: int
    avg_jct_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_wait_s: float
    makespan_s: float
    utilization: float
    preemptions: int
    gpu_hours_lost: float = 0.0  # work thrown away by preemption: GPU-hours since each victim's last checkpoint
    p95_wait_s: float = 0.0
    jain_fairness: float = 1.0
    cost: float = 0.0
    busy_cost: float = 0.0
    energy_kwh: float = 0.0
    unfinished_jobs: int = 0  # jobs still waiting when nothing more could happen (not in the figures above)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted values, interpolating linearly between ranks."""
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(result: SimResult, rates: Sequence[GroupRates] = ()) -> Summary:
    """The figures of one run (all zero when no job ran); ``rates`` price and power its node groups."""
    records = result.records
    if not records:
        return Summary(
            0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            result.preemptions,
            result.lost_gpu_s / 3600,
            unfinished_jobs=result.unfinished,
        )
    jct = sorted(r.jct_s for r in records)
    waits = sorted(r.wait_s for r in records)
    makespan = max(r.finish_s for r in records) - min(r.submit_s for r in records)
    busy = sum(r.gpu_seconds for r in records)
    capacity = result.total_gpus * makespan
    money = spend(rates, result.busy_gpu_s_by_group, makespan)
    return Summary(
        jobs=len(records),
        avg_jct_s=sum(jct) / len(jct),
        p50_jct_s=percentile(jct, 50),
        p95_jct_s=percentile(jct, 95),
        p99_jct_s=percentile(jct, 99),
        avg_wait_s=sum(r.wait_s for r in records) / len(records),
        makespan_s=makespan,
        utilization=min(1.0, busy / capacity) if capacity > 0 else 0.0,
        preemptions=result.preemptions,
        gpu_hours_lost=result.lost_gpu_s / 3600,
        p95_wait_s=percentile(waits, 95),
        jain_fairness=team_fairness(records),
        cost=money.cost,
        busy_cost=money.busy_cost,
        energy_kwh=money.energy_kwh,
        unfinished_jobs=result.unfinished,
    )
