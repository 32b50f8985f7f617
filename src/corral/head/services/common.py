"""Small helpers every service uses inside a write transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from corral.head.store.tables import EventRow, NodeRow


class NotFound(LookupError):
    """An id that names nothing; routers answer 404."""


class NotAllowed(PermissionError):
    """The caller's role does not allow this; routers answer 403."""


class Conflict(ValueError):
    """The request is valid but clashes with current state; routers answer 409."""


class Infeasible(ValueError):
    """A job that can never fit the cluster as it is registered; routers answer 422."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def bump_node(session: Session, node: str) -> int:
    """Advance a node's desired-state version so its agent hears of the change at once."""
    row = session.execute(
        update(NodeRow)
        .where(NodeRow.name == node)
        .values(desired_version=NodeRow.desired_version + 1)
        .returning(NodeRow.desired_version)
    ).scalar_one_or_none()
    version = int(row) if row is not None else 0
    session.info.setdefault("bumped_nodes", {})[node] = version
    return version


def wake_scheduler(session: Session) -> None:
    session.info["wake_scheduler"] = True


def record_event(
    session: Session,
    now: datetime,
    kind: str,
    message: str,
    *,
    job_id: str | None = None,
    node: str | None = None,
    **data: Any,
) -> None:
    session.add(EventRow(ts=now, kind=kind, job_id=job_id, node=node, message=message, data=data))
