"""A simulation's report: the JSON document of ``corral sim -o json``, a table, and files for --out."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corral.sim.engine import SimResult
from corral.sim.metrics import Summary

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


def report_document(summaries: Mapping[str, Summary], skipped_jobs: int) -> dict[str, Any]:
    """``{"policies": {NAME: figures}, "skipped_jobs": N}``, as documented for ``-o json``."""
    return {"policies": {name: s.as_dict() for name, s in summaries.items()}, "skipped_jobs": skipped_jobs}


def hours(seconds: float) -> str:
    """``4.16h`` (the unit scheduling figures are quoted in), or ``27.7d`` from 100 hours up."""
    if seconds >= 100 * 3600:
        return f"{seconds / 86400:.1f}d"
    return f"{seconds / 3600:.2f}h"


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


def write_out(directory: Path, document: Mapping[str, Any], results: Mapping[str, SimResult]) -> list[Path]:
    """``summary.json`` and one ``jobs-POLICY.csv`` per policy (a row per finished job, by finish)."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = directory / "summary.json"
    summary.write_text(json.dumps(document, indent=2) + "\n")
    written = [summary]
    for name, result in results.items():
        path = directory / f"jobs-{name}.csv"
        with path.open("w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(_JOB_COLUMNS)
            for r in result.records:
                times = [r.submit_s, r.start_s, r.finish_s, r.jct_s, r.wait_s]
                writer.writerow([r.id, *times, r.gpus, r.gpu_type, " ".join(r.nodes), r.preemptions, r.lost_gpu_s])
        written.append(path)
    return written
