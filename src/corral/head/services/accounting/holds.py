"""Loading GPU holds from the store: every attempt's task rows, with their stored energy."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from corral.head.services.accounting.figures import Hold
from corral.head.store.tables import EventRow, JobRow, NodeRow, TaskRow

ENERGY_EVENT = "usage.energy"
UNKNOWN_TYPE = "unknown"


def load_holds(
    session: Session,
    since: datetime | None,
    until: datetime,
    user: str | None = None,
    job_ids: Sequence[str] | None = None,
) -> list[Hold]:
    """Tasks that held GPUs at some time in [since, until), of one user's jobs or of everyone's."""
    query = (
        select(TaskRow, JobRow.user, JobRow.team, JobRow.gpu_types)
        .join(JobRow, JobRow.id == TaskRow.job_id)
        .where(TaskRow.started_at.is_not(None), TaskRow.started_at < until)
    )
    if since is not None:
        query = query.where(or_(TaskRow.finished_at.is_(None), TaskRow.finished_at > since))
    if user is not None:
        query = query.where(JobRow.user == user)
    if job_ids is not None:
        query = query.where(TaskRow.job_id.in_(list(job_ids)))
    rows = [r for r in session.execute(query).all() if r[0].gpus]
    # The types each task recorded when placed; the node's inventory now only for older rows.
    types = gpu_types(session, {r[0].node for r in rows if not r[0].gpu_types})
    energy = stored_energy(session, {r[0].id for r in rows})
    holds = []
    for task, job_user, team, wanted in rows:
        fallback = wanted[0] if wanted else UNKNOWN_TYPE
        metered_j, through = energy.get(task.id, (0.0, None))
        kept = task.gpu_types if task.gpu_types and len(task.gpu_types) == len(task.gpus) else None
        holds.append(
            Hold(
                task_id=task.id,
                job_id=task.job_id,
                user=job_user,
                team=team,
                node=task.node,
                gpus=tuple(task.gpus),
                gpu_types=tuple(
                    (str(kept[n]) if kept and kept[n] else types.get((task.node, i), fallback))
                    for n, i in enumerate(task.gpus)
                ),
                fraction=task.gpu_fraction,
                start=task.started_at,
                end=task.finished_at,
                metered_j=metered_j,
                metered_through=through,
            )
        )
    return holds


def gpu_types(session: Session, nodes: Iterable[str]) -> dict[tuple[str, int], str]:
    names = list(nodes)
    found: dict[tuple[str, int], str] = {}
    for start in range(0, len(names), 500):
        for node in session.scalars(select(NodeRow).where(NodeRow.name.in_(names[start : start + 500]))):
            for gpu in node.gpus:
                found[(node.name, int(gpu["index"]))] = str(gpu["type"])
    return found


def energy_events(session: Session, task_ids: Iterable[str]) -> dict[str, EventRow]:
    """Each task's energy row (one per task that held GPUs), by task id.

    The row's ``job_id`` column holds the task id: the event is about that task, and a job's own
    event list (``corral events --job``) stays the story of its state changes."""
    ids = list(task_ids)
    found: dict[str, EventRow] = {}
    for start in range(0, len(ids), 500):
        query = select(EventRow).where(EventRow.kind == ENERGY_EVENT, EventRow.job_id.in_(ids[start : start + 500]))
        for row in session.scalars(query):
            found[str(row.job_id)] = row
    return found


def stored_energy(session: Session, task_ids: Iterable[str]) -> dict[str, tuple[float, datetime | None]]:
    return {task: energy_figures(row.data) for task, row in energy_events(session, task_ids).items()}


def energy_figures(data: dict[str, Any]) -> tuple[float, datetime | None]:
    through = data.get("through")
    return float(data.get("joules", 0.0)), datetime.fromisoformat(through) if through else None
