"""Fairness between teams: Jain's index over each team's average bounded slowdown.

A job's bounded slowdown is ``max(1, JCT / max(run time, 10 s))``: how many times longer it took
than it would alone on the GPU type it got (the 10 s floor keeps very short jobs from dominating).
Each team (the trace's ``vc``) gets the mean over its jobs, and Jain's index of those means,
``(Σx)² / (n · Σx²)``, is 1 when every team is slowed down alike and falls towards 1/n as one
team bears the waiting alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from corral.sim.result import JobRecord

SLOWDOWN_FLOOR_S = 10.0
NO_TEAM = "-"  # the team of jobs whose trace row names none


@dataclass(frozen=True, slots=True)
class TeamFigures:
    """One team's jobs, their mean bounded slowdown, and the GPU time they got."""

    jobs: int
    avg_slowdown: float
    gpu_hours: float
    gpu_share: float  # of all busy GPU-hours in the run

    def as_dict(self) -> dict[str, float]:
        return {
            "jobs": self.jobs,
            "avg_slowdown": self.avg_slowdown,
            "gpu_hours": self.gpu_hours,
            "gpu_share": self.gpu_share,
        }


def bounded_slowdown(record: JobRecord) -> float:
    return max(1.0, record.jct_s / max(record.run_s, SLOWDOWN_FLOOR_S))


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of non-negative values; 1.0 for none or all zero."""
    squares = sum(v * v for v in values)
    if not values or squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def team_figures(records: Iterable[JobRecord]) -> dict[str, TeamFigures]:
    """Per team, by name."""
    jobs: dict[str, list[JobRecord]] = {}
    for record in records:
        jobs.setdefault(record.team or NO_TEAM, []).append(record)
    total = sum(r.gpu_seconds for rs in jobs.values() for r in rs)
    figures = {}
    for team in sorted(jobs):
        rs = jobs[team]
        busy = sum(r.gpu_seconds for r in rs)
        figures[team] = TeamFigures(
            jobs=len(rs),
            avg_slowdown=sum(bounded_slowdown(r) for r in rs) / len(rs),
            gpu_hours=busy / 3600,
            gpu_share=busy / total if total > 0 else 0.0,
        )
    return figures


def team_fairness(records: Iterable[JobRecord]) -> float:
    """Jain's index over the teams' average bounded slowdowns."""
    return jain([t.avg_slowdown for t in team_figures(records).values()])
