"""Small helpers every service uses inside a write transaction."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import Table, update
from sqlalchemy.orm import Session

from corral.head.store.tables import EventRow, NodeRow
from corral.spec.wording import shown


class NotFound(LookupError):
    """An id that names nothing; routers answer 404."""


class NotAllowed(PermissionError):
    """The caller's role does not allow this; routers answer 403."""


class Conflict(ValueError):
    """The request is valid but clashes with current state; routers answer 409."""


class Infeasible(ValueError):
    """A request the head refuses, naming the field (a job that can never fit the cluster as it is
    registered, a period that ends before it starts); answered 422. ``where`` is the part of the request
    the field is in, ``body`` or ``query``, the first item of the error's ``loc`` as FastAPI's own have it."""

    def __init__(self, field: str, message: str, where: Literal["body", "query"] = "body") -> None:
        self.field = field
        self.where = where
        super().__init__(message)


def check_workdir(workdir: str | None, field: str = "workdir") -> None:
    """A new job's or service's working directory must be an absolute path: on the node a relative one
    would be taken against the agent's own directory, which the submitter does not know (``corral submit``
    and ``corral serve`` resolve a relative one against where they run). What the head already holds is
    not checked again."""
    if workdir is not None and not workdir.startswith("/"):
        raise Infeasible(
            field,
            f"must be an absolute path, got {shown(workdir)}: on the node a relative one would be taken against"
            " the agent's directory (corral submit and corral serve resolve it against the directory they run in)",
        )


def bump_node(session: Session, node: str) -> int:
    """Advance a node's desired-state version so its agent hears of the change at once."""
    return bump_nodes(session, [node]).get(node, 0)


def bump_nodes(session: Session, nodes: Iterable[str]) -> dict[str, int]:
    """Advance the nodes' desired-state versions in one statement; each node's new version.

    A Core statement: the ORM's would first flush everything pending. (A node row the session holds
    keeps its old version; ``session.info["bumped_nodes"]`` has the new one.)"""
    names = sorted(set(nodes))
    if not names:
        return {}
    table = cast(Table, NodeRow.__table__)
    rows = session.connection().execute(
        update(table)
        .where(table.c.name.in_(names))
        .values(desired_version=table.c.desired_version + 1)
        .returning(table.c.name, table.c.desired_version)
    )
    versions = {name: int(version) for name, version in rows}
    session.info.setdefault("bumped_nodes", {}).update(versions)
    return versions


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
