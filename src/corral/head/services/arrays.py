"""Job arrays and dependencies at submit time: one row per array element; dependencies must exist.

An array's elements are ordinary jobs that share ``array_id`` (the first element's id) in their
stored spec, each with its own ``array_index`` (``CORRAL_ARRAY_INDEX`` inside the job) and the
array's ``array_limit`` (how many may hold resources at once; None for no limit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.security import Principal
from corral.head.services.common import Infeasible
from corral.head.store.tables import JobRow
from corral.spec import JobSpec

ARRAY_KEYS = ("array_id", "array_index", "array_limit")


def element_specs(
    spec: JobSpec, spec_json: dict[str, Any], new_id: Callable[[], str]
) -> list[tuple[str, dict[str, Any]]]:
    """(job id, stored spec) for each job the spec makes: itself, or one per array index."""
    array = spec.array_spec
    if array is None:
        return [(new_id(), spec_json)]
    ids = [new_id() for _ in array.indices]
    return [
        (job_id, {**spec_json, "array_id": ids[0], "array_index": index, "array_limit": array.limit})
        for job_id, index in zip(ids, array.indices, strict=True)
    ]


def as_submitted(stored: dict[str, Any]) -> dict[str, Any]:
    """The spec as the user sent it, without what the head added for an array element."""
    return {k: v for k, v in stored.items() if k not in ARRAY_KEYS}


def check_dependencies(session: Session, who: Principal, specs: Sequence[JobSpec]) -> None:
    """Every job named in ``after_ok`` / ``after_any`` must exist and be visible to the submitter."""
    wanted = {job_id for spec in specs for job_id in (*spec.after_ok, *spec.after_any)}
    if not wanted:
        return
    query = select(JobRow.id).where(JobRow.id.in_(sorted(wanted)))
    if not who.is_admin:
        query = query.where(JobRow.user == who.user)
    known = set(session.scalars(query))
    for index, spec in enumerate(specs):
        prefix = f"jobs[{index}]." if len(specs) > 1 else ""
        for field in ("after_ok", "after_any"):
            for position, job_id in enumerate(getattr(spec, field)):
                if job_id not in known:
                    raise Infeasible(f"{prefix}{field}[{position}]", f"no job {job_id!r} to depend on")
