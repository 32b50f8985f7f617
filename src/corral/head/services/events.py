"""The event stream: every state change of jobs, nodes and services, in order. A user sees the events of
their own jobs and services, and the cluster's (nodes); an admin sees every one."""

from __future__ import annotations

from sqlalchemy import and_, not_, or_, select

from corral.api import EventOut
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.store.tables import EventRow, JobRow

SERVICE_EVENTS = "service."  # kinds of the events about a service, whose ``data.owner`` is its user


def list_events(rt: HeadRuntime, who: Principal, after: int, limit: int, job_id: str | None) -> list[EventOut]:
    """Events with id > ``after``, oldest first; with ``after`` < 0, the newest ``limit`` events."""
    with rt.read() as session:
        query = select(EventRow)
        if job_id:
            query = query.where(EventRow.job_id == job_id)
        if not who.is_admin:
            own = select(JobRow.id).where(JobRow.user == who.user)
            service = EventRow.kind.startswith(SERVICE_EVENTS)
            query = query.where(
                or_(
                    and_(EventRow.job_id.is_(None), not_(service)),  # the cluster's: nodes and such
                    and_(EventRow.job_id.is_(None), service, EventRow.data["owner"].as_string() == who.user),
                    EventRow.job_id.in_(own),
                )
            )
        if after >= 0:
            rows = list(session.scalars(query.where(EventRow.id > after).order_by(EventRow.id).limit(limit)))
        else:
            rows = list(session.scalars(query.order_by(EventRow.id.desc()).limit(limit)))
            rows.reverse()
    return [
        EventOut(id=r.id, ts=r.ts, kind=r.kind, job_id=r.job_id, node=r.node, message=r.message, data=r.data)
        for r in rows
    ]
