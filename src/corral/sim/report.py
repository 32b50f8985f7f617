"""A simulation's report: the JSON document of ``corral sim -o json``, a table, and files for --out."""

from __future__ import annotations

import csv
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from corral.sched.describe import plain_decimal
from corral.sim.costs import cost_per_hour, group_rates
from corral.sim.fairness import team_figures
from corral.sim.metrics import Summary
from corral.sim.result import SimResult
from corral.sim.workload import NEVER_FITS
from corral.spec import ClusterSpec

SUMMARY = "summary.json"
ORACLE = "srpt-oracle"  # the clairvoyant bound other policies are measured against
_JOB_COLUMNS = (
    "job_id",
    "submit_s",
    "start_s",
    "finish_s",
    "jct_s",
    "wait_s",
    "gpus",
    "gpu_type",
    "nodes",
    "preemptions",
    "gpu_s_lost",
)


def report_document(
    summaries: Mapping[str, Summary],
    skipped_jobs: int,
    cluster: ClusterSpec | None = None,
    results: Mapping[str, SimResult] | None = None,
) -> dict[str, Any]:
    """``{"policies": {NAME: figures}, "skipped_jobs": N}``, as documented for ``-o json``.

    With the cluster, ``"cluster"`` describes what was simulated; with the results, ``"teams"``
    gives each policy's figures per team.
    """
    document: dict[str, Any] = {
        "policies": {name: s.as_dict() for name, s in summaries.items()},
        "skipped_jobs": skipped_jobs,
    }
    for name, ratio in oracle_ratios(summaries).items():
        document["policies"][name]["avg_jct_vs_oracle"] = ratio
    if cluster is not None:
        document["cluster"] = cluster_document(cluster)
    if results is not None:
        document["teams"] = {
            name: {team: f.as_dict() for team, f in team_figures(result.records).items()}
            for name, result in results.items()
        }
    return document


def cluster_document(spec: ClusterSpec) -> dict[str, Any]:
    """The simulated cluster's node groups with the price and power used for each, and its totals."""
    rates = group_rates(spec)
    groups = [
        {
            "name": group.group_name,
            "count": group.count,
            "gpus_per_node": group.gpus_per_node,
            "gpu_type": group.gpu_type,
            "gpus": rate.gpus,
            "price_per_gpu_hour": rate.price_per_gpu_hour,
            "watts_busy": rate.watts_busy,
            "watts_idle": rate.watts_idle,
            "speed": spec.speed(group.gpu_type),
        }
        for group, rate in zip(spec.node_groups, rates, strict=True)
    ]
    return {
        "node_groups": groups,
        "nodes": sum(g.count for g in spec.node_groups),
        "gpus": spec.total_gpus,
        "cost_per_hour": cost_per_hour(rates),
    }


def counted(count: int, noun: str) -> str:
    """``1 job``, ``2 jobs``, ``0 jobs``."""
    return f"{count} {noun if count == 1 else noun + 's'}"


_PLURAL_REASONS = {NEVER_FITS: "never fit this cluster"}  # the verb agrees: "3 never fit"


def skipped_reasons(skipped: Mapping[str, int]) -> str:
    """``1 never ran (no duration), 3 never fit this cluster``."""
    return ", ".join(
        f"{count} {reason if count == 1 else _PLURAL_REASONS.get(reason, reason)}" for reason, count in skipped.items()
    )


def skipped_note(skipped: Mapping[str, int]) -> str:
    """``skipped 4 trace rows: 3 never fit this cluster, 1 never ran (no duration)``."""
    return f"skipped {counted(sum(skipped.values()), 'trace row')}: {skipped_reasons(skipped)}"


def oracle_ratios(summaries: Mapping[str, Summary]) -> dict[str, float | None]:
    """Each policy's average JCT over the clairvoyant bound's, when ``srpt-oracle`` ran; None for every
    policy when that average is 0 (no job, or only jobs that took no time)."""
    oracle = summaries.get(ORACLE)
    if oracle is None:
        return {}
    return {name: s.avg_jct_s / oracle.avg_jct_s if oracle.avg_jct_s > 0 else None for name, s in summaries.items()}


def oracle_note(summaries: Mapping[str, Summary]) -> str | None:
    """``average JCT ÷ srpt-oracle's (a clairvoyant bound): default 1.028, fifo 1.557``, when the oracle ran."""
    ratios = {name: r for name, r in oracle_ratios(summaries).items() if name != ORACLE and r is not None}
    if not ratios:
        return None
    listed = ", ".join(f"{name} {ratio:.3f}" for name, ratio in ratios.items())
    return f"average JCT ÷ {ORACLE}'s (a clairvoyant bound): {listed}"


def hours(seconds: float) -> str:
    """``4.16h`` (the unit scheduling figures are quoted in), or ``27.7d`` from 100 hours up (as shown)."""
    if round(seconds / 3600, 2) >= 100:
        return f"{seconds / 86400:.1f}d"
    return f"{seconds / 3600:.2f}h"


def amount(value: float) -> str:
    """A cost or an energy for the table: whole from 100 up (``154,266``), with two decimals below (``0.39``)."""
    return f"{value:,.0f}" if round(value) >= 100 else f"{value:.2f}"


def table_rows(summaries: Mapping[str, Summary]) -> list[list[str]]:
    """One row per policy for the human table."""
    return [
        [
            name,
            str(s.jobs),
            hours(s.avg_jct_s),
            hours(s.p50_jct_s),
            hours(s.p95_jct_s),
            hours(s.p99_jct_s),
            hours(s.avg_wait_s),
            hours(s.makespan_s),
            f"{s.utilization:.1%}",
            str(s.preemptions),
            f"{s.gpu_hours_lost:.1f}h",
        ]
        for name, s in summaries.items()
    ]


def spend_rows(summaries: Mapping[str, Summary]) -> list[list[str]]:
    """One row per policy for the second table: waiting tail, fairness, money and energy."""
    return [
        [
            name,
            hours(s.p95_wait_s),
            f"{s.jain_fairness:.3f}",
            amount(s.cost),
            amount(s.busy_cost),
            amount(s.energy_kwh),
        ]
        for name, s in summaries.items()
    ]


SPEND_COLUMNS = ("POLICY", "P95 WAIT", "JAIN (TEAMS)", "COST", "BUSY COST", "ENERGY kWh")

TABLE_COLUMNS = (
    "POLICY",
    "JOBS",
    "AVG JCT",
    "P50",
    "P95",
    "P99",
    "AVG WAIT",
    "MAKESPAN",
    "UTIL",
    "PREEMPT",
    "LOST",
)


def jobs_file(policy: str) -> str:
    """The name of a policy's per-job CSV file under ``--out``."""
    return f"jobs-{policy}.csv"


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same path once resolved, or the same file on disk."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.samefile(b)
    except OSError:  # either is missing
        return False


def write_out(
    directory: Path, document: Mapping[str, Any], results: Mapping[str, SimResult], keep: Collection[Path] = ()
) -> list[Path]:
    """``summary.json`` and one ``jobs-POLICY.csv`` per policy: a row per finished job (by finish), then
    one per unfinished job (by submit, no finish). A ``jobs-POLICY.csv`` of a policy not in ``results``
    is removed, so the folder shows one run, unless it is one of ``keep`` (the files the run read) or a
    folder."""
    from corral.sched import POLICIES

    directory.mkdir(parents=True, exist_ok=True)
    summary = directory / SUMMARY
    summary.write_text(json.dumps(document, indent=2) + "\n")
    written = [summary]
    for name in POLICIES:
        stale = directory / jobs_file(name)
        if name not in results and not stale.is_dir() and not any(same_file(stale, path) for path in keep):
            stale.unlink(missing_ok=True)  # a folder of that name is no report file: left alone
    for name, result in results.items():
        path = directory / jobs_file(name)
        with path.open("w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(_JOB_COLUMNS)
            for r in result.records:
                times = [r.submit_s, r.start_s, r.finish_s, r.jct_s, r.wait_s]
                row = [r.id, *times, r.gpus, r.gpu_type, " ".join(r.nodes), r.preemptions, r.lost_gpu_s]
                writer.writerow(_cells(row))
            for u in result.unfinished_jobs:
                start: float | str = "" if u.start_s is None else u.start_s
                wait: float | str = "" if u.start_s is None else u.start_s - u.submit_s
                writer.writerow(
                    _cells([u.id, u.submit_s, start, "", "", wait, u.gpus, "", "", u.preemptions, u.lost_gpu_s])
                )
        written.append(path)
    return written


def _cells(row: list[Any]) -> list[Any]:
    """Numbers as plain decimals (``0.00001``, never ``1e-05``); text as it is."""
    return [plain_decimal(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in row]


def unfinished_note(results: Mapping[str, SimResult], quotas: bool, shown: int = 5) -> list[str]:
    """A line per policy that left jobs unfinished: how many, the first ``shown`` ids, and why."""
    why = "still waiting when nothing more could happen"
    if quotas:
        why += " (a team's quota and borrowing limit in --config below what a job asks keep it from starting)"
    lines = []
    for name, result in results.items():
        jobs = result.unfinished_jobs
        if not jobs:
            continue
        ids = ", ".join(u.id for u in jobs[:shown]) + (f" and {len(jobs) - shown} more" if len(jobs) > shown else "")
        many = len(jobs) > 1
        lines.append(
            f"unfinished under {name}: {counted(len(jobs), 'job')} never finished"
            f" ({'they are' if many else 'it is'} left out of the figures): {ids}; {why}"
        )
    return lines
