"""The report's plots, drawn with matplotlib's Agg canvas (no display, no global pyplot state)."""

from __future__ import annotations

import warnings
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from corral.sim.fairness import team_figures
from corral.sim.result import Sample, SimResult

MAX_POINTS = 4000  # a longer timeline is resampled evenly: plots stay small and fast
MAX_TEAMS = 20  # teams drawn one by one in the team share plot; the rest are one bar
PLOTS = {
    "utilization": "utilization.png",
    "queue": "queue.png",
    "jct_cdf": "jct_cdf.png",
    "team_share": "team_share.png",
}


def draw_all(directory: Path, results: Mapping[str, SimResult]) -> dict[str, Path]:
    """Every plot as a PNG file in ``directory``, by plot name."""
    paths = {name: directory / filename for name, filename in PLOTS.items()}
    utilization_over_time(results, paths["utilization"])
    queue_over_time(results, paths["queue"])
    jct_cdf(results, paths["jct_cdf"])
    team_share(results, paths["team_share"])
    return paths


def utilization_over_time(results: Mapping[str, SimResult], path: Path) -> None:
    figure, axes = _figure("GPU utilization over time", "busy GPUs / all GPUs")
    unit, scale = _time_unit(results)
    for name, result in results.items():
        times, busy = resample(result.timeline, lambda s: s.busy_gpus)
        total = result.total_gpus or 1
        axes.step([t / scale for t in times], [b / total for b in busy], where="post", label=name, linewidth=1)
    axes.set_xlabel(f"time ({unit})")
    axes.set_ylim(0, 1.05)
    _save(figure, axes, path)


def queue_over_time(results: Mapping[str, SimResult], path: Path) -> None:
    figure, axes = _figure("Queue length over time", "pending jobs")
    unit, scale = _time_unit(results)
    for name, result in results.items():
        times, pending = resample(result.timeline, lambda s: s.pending_jobs)
        axes.step([t / scale for t in times], pending, where="post", label=name, linewidth=1)
    axes.set_xlabel(f"time ({unit})")
    _save(figure, axes, path)


def jct_cdf(results: Mapping[str, SimResult], path: Path) -> None:
    figure, axes = _figure("Job completion time (CDF)", "fraction of jobs")
    longest = 0.0
    for name, result in results.items():
        jct = sorted(max(r.jct_s, 1.0) / 3600 for r in result.records)
        if jct:
            longest = max(longest, jct[-1])
            axes.step(jct, [(k + 1) / len(jct) for k in range(len(jct))], where="post", label=name, linewidth=1)
    axes.set_xlabel("JCT (hours)")
    if longest > 1:
        axes.set_xscale("log")
    axes.set_ylim(0, 1.02)
    _save(figure, axes, path)


def team_share(results: Mapping[str, SimResult], path: Path) -> None:
    figure, axes = _figure("Share of busy GPU-hours per team", "team")
    shares = {
        name: {team: figures.gpu_share for team, figures in team_figures(result.records).items()}
        for name, result in results.items()
    }
    teams, bars = shown_teams(shares)
    height = 0.8 / max(1, len(shares))
    for k, (name, values) in enumerate(bars.items()):
        axes.barh([i + k * height for i in range(len(teams))], values, height=height, label=name)
    # team names are the trace's text: a $ in one is a dollar sign, not the start of TeX matplotlib would parse
    axes.set_yticks([i + 0.4 - height / 2 for i in range(len(teams))], teams, parse_math=False)
    axes.set_xlabel("share of busy GPU-hours")
    axes.invert_yaxis()
    _save(figure, axes, path)


def shown_teams(
    shares: Mapping[str, Mapping[str, float]], limit: int = MAX_TEAMS
) -> tuple[list[str], dict[str, list[float]]]:
    """The team share plot's bars: the teams by name, each policy's share for each; past ``limit`` teams,
    the ``limit`` with the largest share under any policy, and the others summed in a last bar that says
    how many they are (thousands of bars would be unreadable, and slow to draw)."""
    every = {team for by_team in shares.values() for team in by_team}
    if len(every) <= limit:
        teams = sorted(every)
        return teams, {name: [by_team.get(t, 0.0) for t in teams] for name, by_team in shares.items()}
    largest = {team: max(by_team.get(team, 0.0) for by_team in shares.values()) for team in every}
    teams = sorted(sorted(every, key=lambda t: (-largest[t], t))[:limit])
    drawn = set(teams)
    bars = {
        name: [*(by_team.get(t, 0.0) for t in teams), sum(v for t, v in by_team.items() if t not in drawn)]
        for name, by_team in shares.items()
    }
    return [*teams, f"{len(every) - limit:,} other teams"], bars


def resample(
    samples: Sequence[Sample], value: Callable[[Sample], float], points: int = MAX_POINTS
) -> tuple[list[float], list[float]]:
    """The timeline as (times, values); past ``points`` samples, the value in force at evenly spaced times."""
    if len(samples) <= points:
        return [s.time_s for s in samples], [float(value(s)) for s in samples]
    start, end = samples[0].time_s, samples[-1].time_s
    times = [start + (end - start) * k / (points - 1) for k in range(points)]
    stamps = [s.time_s for s in samples]
    return times, [float(value(samples[max(0, bisect_right(stamps, t) - 1)])) for t in times]


def _time_unit(results: Mapping[str, SimResult]) -> tuple[str, float]:
    end = max((r.timeline[-1].time_s for r in results.values() if r.timeline), default=0.0)
    return ("days", 86400.0) if end > 72 * 3600 else ("hours", 3600.0)


def _figure(title: str, ylabel: str) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(8, 4.5), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    axes.grid(True, alpha=0.3)
    return figure, axes


def _save(figure: Figure, axes: Axes, path: Path) -> None:
    if axes.get_legend_handles_labels()[0]:
        axes.legend()
    with warnings.catch_warnings():
        # a team name in a script the font lacks (CJK, emoji) is drawn with boxes, and the report's tables
        # show it as written: matplotlib's warning per glyph would only put its source lines on stderr
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        figure.savefig(path, format="png")
