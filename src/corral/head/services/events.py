"""The event stream: every state change of jobs and nodes, in order."""

from __future__ import annotations

from sqlalchemy import or_, select

from corral.api import EventOut
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.store.tables import EventRow, JobRow


def list_events(rt: HeadRuntime, who: Principal, after: int, limit: int, job_id: str | None) -> list[EventOut]:
    """Events with id > ``after``, oldest first; with ``after`` < 0, the newest ``limit`` events."""
    with rt.read() as session:
        query = select(EventRow)
        if job_id:
            query = query.where(EventRow.job_id == job_id)
        if not who.is_admin:
            own = select(JobRow.id).where(JobRow.user == who.user)
            query = query.where(or_(EventRow.job_id.is_(None), EventRow.job_id.in_(own)))
        if after >= 0:
            rows = list(session.scalars(query.where(EventRow.id > after).order_by(EventRow.id).limit(limit)))
        else:
            rows = list(session.scalars(query.order_by(EventRow.id.desc()).limit(limit)))
            rows.reverse()
    return [
        EventOut(id=r.id, ts=r.ts, kind=r.kind, job_id=r.job_id, node=r.node, message=r.message, data=r.data)
        for r in rows
    ]
