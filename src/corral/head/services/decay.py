"""Decayed GPU usage by team and user, for fair share.

Each task contributes its GPUs times the time it held them, weighted by 2^(-age / half-life):
usage from one half-life ago counts half. The integral over [start, end] is exact:
``GPUs × half_life / ln 2 × (2^-(now-end)/h − 2^-(now-start)/h)``. Tasks that ended more than
ten half-lives ago (weight under 0.1 %) are left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import FairShare

HORIZON_HALF_LIVES = 10


def decayed_seconds(start: datetime, end: datetime, now: datetime, half_life_s: float) -> float:
    """∫ 2^(-(now - t) / half_life) dt over [start, end], in seconds."""
    if end <= start:
        return 0.0
    age_end = max(0.0, (now - end).total_seconds())
    age_start = max(0.0, (now - start).total_seconds())
    scale = half_life_s / math.log(2)
    return scale * (2 ** (-age_end / half_life_s) - 2 ** (-age_start / half_life_s))


def fair_share_usage(
    session: Session, now: datetime, half_life_s: float, weights: dict[str, float] | None = None
) -> FairShare:
    """Every team's and user's decayed GPU-seconds, by GPU type."""
    horizon = now - timedelta(seconds=HORIZON_HALF_LIVES * half_life_s)
    types = {
        row.name: {int(g["index"]): str(g["type"]) for g in row.gpus}
        for row in session.execute(select(NodeRow.name, NodeRow.gpus)).all()
    }
    rows = session.execute(
        select(
            TaskRow.node,
            TaskRow.gpus,
            TaskRow.gpu_fraction,
            TaskRow.started_at,
            TaskRow.finished_at,
            JobRow.team,
            JobRow.user,
        )
        .join(JobRow, JobRow.id == TaskRow.job_id)
        .where(TaskRow.started_at.is_not(None), or_(TaskRow.finished_at.is_(None), TaskRow.finished_at >= horizon))
    ).all()
    teams: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    users: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for node, gpus, fraction, started, finished, team, user in rows:
        gpu_type = next((types.get(node, {}).get(i) for i in gpus if i in types.get(node, {})), None)
        if gpu_type is None or started is None:
            continue
        seconds = len(gpus) * fraction * decayed_seconds(max(started, horizon), finished or now, now, half_life_s)
        teams[team][gpu_type] += seconds
        users[user][gpu_type] += seconds
    return FairShare(
        teams={t: dict(u) for t, u in teams.items()},
        users={u: dict(v) for u, v in users.items()},
        weights=dict(weights or {}),
    )
