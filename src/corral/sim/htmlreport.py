"""``report.html`` for ``--out``: the figures as tables, and the plots as PNG files beside it."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corral.sched.describe import plain_decimal
from corral.sim.plots import PLOTS, draw_all
from corral.sim.report import SUMMARY, amount, counted, jobs_file
from corral.sim.result import SimResult

REPORT = "report.html"
_FIGURES = (
    ("jobs", "jobs", "{:d}"),
    ("avg_jct_s", "avg JCT (h)", "hours"),
    ("avg_jct_vs_oracle", "avg JCT ÷ srpt-oracle", "{:.3f}"),  # only when the oracle ran
    ("p50_jct_s", "p50 JCT (h)", "hours"),
    ("p95_jct_s", "p95 JCT (h)", "hours"),
    ("p99_jct_s", "p99 JCT (h)", "hours"),
    ("avg_wait_s", "avg wait (h)", "hours"),
    ("p95_wait_s", "p95 wait (h)", "hours"),
    ("makespan_s", "makespan (h)", "hours"),
    ("utilization", "utilization", "{:.1%}"),
    ("preemptions", "preemptions", "{:d}"),
    ("gpu_hours_lost", "GPU-h lost", "{:.1f}"),
    ("jain_fairness", "Jain (teams)", "{:.3f}"),
    ("cost", "cost", "amount"),
    ("busy_cost", "busy cost", "amount"),
    ("energy_kwh", "energy (kWh)", "amount"),
    ("unfinished_jobs", "unfinished jobs", "{:d}"),
)
_CAPTIONS = {
    "utilization": "Busy GPUs over all GPUs, after each moment something happened.",
    "queue": "Jobs waiting to start (new and preempted).",
    "jct_cdf": "Fraction of jobs finished within a given completion time (finish − submit).",
    "team_share": (
        "Each team's share of the GPU-hours jobs held (the trace's vc column); past 20 teams, the 20 with the"
        " largest share, and the others together in the last bar."
    ),
}
_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;margin-bottom:1.5em}"
    "td,th{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:right}"
    "th:first-child,td:first-child{text-align:left}img{max-width:100%}"
)


def write_html_report(directory: Path, document: Mapping[str, Any], results: Mapping[str, SimResult]) -> list[Path]:
    """The plots and ``report.html`` (which shows them by relative path); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    plots = draw_all(directory, results)
    page = directory / REPORT
    page.write_text(render_page(document, {name: path.name for name, path in plots.items()}))
    return [page, *plots.values()]


def out_files(policies: Iterable[str]) -> list[str]:
    """The name of every file ``--out`` writes for these policies: the summary, the per-job CSVs, the page
    and its plots."""
    return [SUMMARY, *(jobs_file(name) for name in policies), REPORT, *PLOTS.values()]


def render_page(document: Mapping[str, Any], images: Mapping[str, str]) -> str:
    """The HTML page for a report document and its plot files (by plot name)."""
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">']
    parts.append(f"<title>corral sim report</title><style>{_STYLE}</style></head><body>")
    parts.append("<h1>Simulation report</h1>")
    cluster = document.get("cluster")
    if cluster:
        parts.append(_cluster_section(cluster))
    policies: Mapping[str, Mapping[str, Any]] = document["policies"]
    shown = [f for f in _FIGURES if any(f[0] in figures for figures in policies.values())]
    rows = [[name, *(_format(figures.get(key, 0), how) for key, _, how in shown)] for name, figures in policies.items()]
    parts.append("<h2>Policies</h2>")
    parts.append(_table(["policy", *(label for _, label, _ in shown)], rows))
    parts.append(f"<p>Trace rows not simulated: {int(document.get('skipped_jobs', 0))}.</p>")
    for name, filename in images.items():
        parts.append(f'<figure><img src="{html.escape(filename)}" alt="{html.escape(name)}">')
        parts.append(f"<figcaption>{html.escape(_CAPTIONS.get(name, ''))}</figcaption></figure>")
    for policy, teams in (document.get("teams") or {}).items():
        parts.append(f"<h2>Teams under {html.escape(policy)}</h2>")
        team_rows = [
            [team, str(f["jobs"]), f"{f['avg_slowdown']:.2f}", f"{f['gpu_hours']:,.1f}", f"{f['gpu_share']:.1%}"]
            for team, f in teams.items()
        ]
        parts.append(_table(["team", "jobs", "avg bounded slowdown", "GPU-hours", "GPU share"], team_rows))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _cluster_section(cluster: Mapping[str, Any]) -> str:
    rows = [
        [
            g["name"],
            g["gpu_type"],
            str(g["count"]),
            str(g["gpus_per_node"]),
            str(g["gpus"]),
            _plain(g["price_per_gpu_hour"]),
            f"{_plain(g['watts_busy'])} / {_plain(g['watts_idle'])}",
        ]
        for g in cluster["node_groups"]
    ]
    head = ["node group", "GPU type", "nodes", "GPUs per node", "GPUs", "price per GPU-hour", "watts busy / idle"]
    nodes, gpus = counted(cluster["nodes"], "node"), counted(cluster["gpus"], "GPU")
    summary = f"<p>{nodes}, {gpus}, {cluster['cost_per_hour']:,.2f} per hour.</p>"
    return "<h2>Cluster</h2>" + _table(head, rows) + summary


def _plain(value: float) -> str:
    """``2.5``, ``300``, ``0.00001``, ``1000000``: as given, with no exponent and no ``.0``."""
    return plain_decimal(value).removesuffix(".0")


def _format(value: Any, how: str) -> str:
    if value is None:  # avg_jct_vs_oracle when the oracle's average JCT is 0: there is no ratio
        return "-"
    if how == "hours":
        return f"{float(value) / 3600:.2f}"
    if how == "amount":  # as the table prints it: whole from 100 up, two decimals below
        return amount(float(value))
    return how.format(value)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
