"""Jobs: submit (with feasibility and idempotency), list, show, cancel."""

from __future__ import annotations

import secrets
import string
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, insert, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from corral.api import AllocationOut, CancelOut, JobOut, TaskOut
from corral.api.usage import UsageOut
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.accounting import job_usage
from corral.head.services.arrays import as_submitted, check_dependencies, element_specs
from corral.head.services.classes import resolve
from corral.head.services.common import Conflict, Infeasible, NotFound, check_workdir, record_event, wake_scheduler
from corral.head.services.convert import request_of
from corral.head.services.lifecycle import LIVE_TASK_STATES, end_job
from corral.head.services.users import team_checked
from corral.head.store.tables import EventRow, JobRow, TaskRow
from corral.model import TERMINAL_JOB_STATES, JobState, Node, NodeState
from corral.sched import NO_CONTAINER_RUNTIME, ClusterShapes, no_domain_holds
from corral.spec import JobSpec

_ID_ALPHABET = string.ascii_lowercase + string.digits
DEFAULT_TEAM = "default"
RECENT_WINDOW = timedelta(hours=24)


def new_job_id() -> str:
    return "j-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))


def submit(rt: HeadRuntime, who: Principal, spec: JobSpec, idempotency_key: str | None = None) -> tuple[JobOut, bool]:
    """Accept one job; a repeated idempotency key returns the first submission's job (created=False).

    Reusing a key for a different job is refused (409): it is a client bug, not a retry. An empty key is
    no key (stored as none, so that two jobs without one never collide).
    """
    idempotency_key = idempotency_key or None
    try:
        return _submit_once(rt, who, spec, idempotency_key)
    except IntegrityError:
        if not idempotency_key:
            raise
        return _submit_once(rt, who, spec, idempotency_key)  # a concurrent retry won the race: answer its job


def _submit_once(rt: HeadRuntime, who: Principal, spec: JobSpec, idempotency_key: str | None) -> tuple[JobOut, bool]:
    now = rt.clock.now()
    spec = resolve(team_checked(spec, who, rt.config.current), who, rt.config.current)
    with rt.write() as session:
        if idempotency_key:
            existing = session.scalar(
                select(JobRow).where(JobRow.user == who.user, JobRow.idempotency_key == idempotency_key)
            )
            if existing is not None:
                if as_submitted(existing.spec) != _spec_json(spec):
                    raise Conflict(
                        f"Idempotency-Key {idempotency_key!r} was used for job {existing.id} with a different "
                        "spec; use a new key for a new job"
                    )
                return to_out(session, existing, rt), False
        _check_feasible(rt, session, [spec])
        check_dependencies(session, who, [spec])
        rows = _new_rows(spec, who, now, idempotency_key)
        session.add_all(rows)
        for row in rows:
            record_event(session, now, "job.submitted", f"submitted by {who.user}", job_id=row.id)
        wake_scheduler(session)
        session.flush()
        return to_out(session, rows[0], rt, tasks=[]).model_copy(update={"usage": UsageOut()}), True


def submit_many(
    rt: HeadRuntime, who: Principal, specs: Sequence[JobSpec], idempotency_key: str | None = None
) -> tuple[list[str], bool]:
    """Accept many jobs in one transaction, all or none; answers their ids in order, and whether they are new.

    With an idempotency key the batch holds one job (an array is one): a repeat answers the ids the first
    request made (its first job carries the key), as ``submit`` does for one job."""
    idempotency_key = idempotency_key or None
    if idempotency_key and len(specs) != 1:
        raise Infeasible(
            "jobs", f"a batch sent with an Idempotency-Key holds one job (an array is one), not {len(specs)}"
        )
    try:
        return _submit_many_once(rt, who, specs, idempotency_key)
    except IntegrityError:
        if not idempotency_key:
            raise
        return _submit_many_once(rt, who, specs, idempotency_key)  # a concurrent retry won the race: answer its ids


def _submit_many_once(
    rt: HeadRuntime, who: Principal, specs: Sequence[JobSpec], idempotency_key: str | None
) -> tuple[list[str], bool]:
    now = rt.clock.now()
    config = rt.config.current
    prefixes = [f"jobs[{i}]." if len(specs) > 1 else "" for i in range(len(specs))]
    specs = [resolve(team_checked(s, who, config, p), who, config, p) for s, p in zip(specs, prefixes, strict=True)]
    with rt.write() as session:
        if idempotency_key:
            existing = session.scalar(
                select(JobRow).where(JobRow.user == who.user, JobRow.idempotency_key == idempotency_key)
            )
            if existing is not None:
                if as_submitted(existing.spec) != _spec_json(specs[0]):
                    raise Conflict(
                        f"Idempotency-Key {idempotency_key!r} was used for job {existing.id} with a different "
                        "spec; use a new key for a new job"
                    )
                return [row.id for row in _with_their_arrays(session, [existing])], False
        _check_feasible(rt, session, specs)
        check_dependencies(session, who, specs)
        rows = [row for spec in specs for row in _new_rows(spec, who, now, idempotency_key)]
        session.execute(insert(JobRow), [_columns(row) for row in rows])
        message = f"submitted by {who.user}"
        session.execute(
            insert(EventRow),
            [
                {"ts": now, "kind": "job.submitted", "job_id": r.id, "node": None, "message": message, "data": {}}
                for r in rows
            ],
        )
        wake_scheduler(session)
        return [row.id for row in rows], True


def _spec_json(spec: JobSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=False)


def _columns(row: JobRow) -> dict[str, Any]:
    return {column.key: getattr(row, column.key) for column in JobRow.__table__.columns if column.key != "seq"}


def _new_rows(spec: JobSpec, who: Principal, now: datetime, idempotency_key: str | None) -> list[JobRow]:
    """The job's row, or one per array element (the first carries the idempotency key)."""
    elements = element_specs(spec, _spec_json(spec), new_job_id)
    return [
        _row(job_id, spec, stored, who, now, idempotency_key if n == 0 else None)
        for n, (job_id, stored) in enumerate(elements)
    ]


def _new_row(spec: JobSpec, who: Principal, now: datetime, idempotency_key: str | None) -> JobRow:
    """One job's row (an array spec is not expanded: use ``_new_rows``)."""
    return _row(new_job_id(), spec, _spec_json(spec), who, now, idempotency_key)


def _row(
    job_id: str, spec: JobSpec, stored: dict[str, Any], who: Principal, now: datetime, idempotency_key: str | None
) -> JobRow:
    return JobRow(
        id=job_id,
        name=spec.display_name,
        user=who.user,
        team=spec.team or DEFAULT_TEAM,
        priority=spec.priority,
        state=JobState.PENDING.value,
        spec=stored,
        nodes=spec.nodes,
        gpus_per_node=spec.resources.gpus,
        gpu_types=list(spec.resources.gpu_type),
        cpus=spec.resources.cpus,
        memory_mb=spec.resources.memory_mb,
        submitted_at=now,
        started_at=None,
        finished_at=None,
        exit_code=None,
        restarts=0,
        generation=0,
        reason="waiting for the scheduler",
        idempotency_key=idempotency_key,
    )


def runtime_up(nodes: Sequence[Node]) -> bool:
    """Whether a registered node that is up (READY, or drained for now) can run jobs with an image."""
    return any(n.container_runtime and n.state is not NodeState.NOT_READY for n in nodes)


def _check_feasible(rt: HeadRuntime, session: Session, specs: Sequence[JobSpec]) -> None:
    for index, spec in enumerate(specs):
        check_workdir(spec.workdir, f"jobs[{index}].workdir" if len(specs) > 1 else "workdir")
    nodes = rt.node_models.load(session)
    if not nodes:
        return  # a cluster still starting: accept, the job waits with a reason
    runtimes = runtime_up(nodes)
    shapes = ClusterShapes(nodes)
    for index, spec in enumerate(specs):
        prefix = f"jobs[{index}]." if len(specs) > 1 else ""
        if spec.image is not None and not runtimes:
            raise Infeasible(f"{prefix}image", NO_CONTAINER_RUNTIME)
        request = request_of(spec)
        problem = shapes.never_fits(request)
        if problem is not None:
            # Name what to change: the gang's size when one node of it would fit, else what a node needs.
            one_node_fits = request.nodes > 1 and shapes.never_fits(replace(request, nodes=1)) is None
            field = "nodes" if one_node_fits else "resources"
            raise Infeasible(f"{prefix}{field}", f"can never run on this cluster: {problem}")
        problem = no_domain_holds(request, nodes, shapes)
        if problem is not None:
            raise Infeasible(f"{prefix}topology", f"can never run on this cluster: {problem}")


def get_row(session: Session, job_id: str, who: Principal) -> JobRow:
    row = session.scalar(select(JobRow).where(JobRow.id == job_id))
    if row is None or (not who.is_admin and row.user != who.user):
        raise NotFound(f"no job {job_id!r}")
    return row


def get_rows(session: Session, job_ids: Sequence[str], who: Principal, verb: str) -> list[JobRow]:
    """The jobs, in the order given (each once), or ``NotFound`` naming every id that names none of
    the caller's jobs, before anything is done to any of them (``verb``: what would have been done)."""
    wanted = list(dict.fromkeys(job_ids))
    found = {row.id: row for row in session.scalars(select(JobRow).where(JobRow.id.in_(wanted)))}
    unknown = [i for i in wanted if i not in found or (not who.is_admin and found[i].user != who.user)]
    if not unknown:
        return [found[i] for i in wanted]
    named = f"no job {unknown[0]!r}" if len(unknown) == 1 else "no jobs " + ", ".join(repr(i) for i in unknown)
    if len(wanted) == 1:
        raise NotFound(named)
    raise NotFound(f"{named}; none of the {len(wanted)} jobs given was {verb}")


def show(rt: HeadRuntime, who: Principal, job_id: str) -> JobOut:
    with rt.read() as session:
        row = get_row(session, job_id, who)
        return to_out(session, row, rt).model_copy(update={"usage": job_usage(session, rt, row.id)})


def list_jobs(rt: HeadRuntime, who: Principal, include_all: bool, states: Sequence[str], limit: int) -> list[JobOut]:
    now = rt.clock.now()
    with rt.read() as session:
        query = select(JobRow)
        if not who.is_admin:
            query = query.where(JobRow.user == who.user)
        if states:
            query = query.where(JobRow.state.in_(list(states)))
        elif not include_all:
            terminal = [s.value for s in TERMINAL_JOB_STATES]
            query = query.where(or_(JobRow.state.not_in(terminal), JobRow.finished_at >= now - RECENT_WINDOW))
        # Jobs still queued or running first, so a limit drops only finished ones while it can.
        ended = case((JobRow.state.in_([s.value for s in TERMINAL_JOB_STATES]), 1), else_=0)
        rows = list(session.scalars(query.order_by(ended, JobRow.seq.desc()).limit(limit)))
        rows.sort(key=_by_seq)
        tasks = _tasks_by_job(session, rows)
        return [to_out(session, row, rt, tasks=tasks.get(row.id, [])) for row in rows]


def _by_seq(row: JobRow) -> int:
    return row.seq


def cancel(rt: HeadRuntime, who: Principal, job_ids: Sequence[str], whole_arrays: bool = False) -> list[CancelOut]:
    """Cancel every job given, or none: an unknown id (or another user's job, which is not revealed)
    refuses the whole request. A job that has already ended is left as it is, and said to be. With
    ``whole_arrays``, a job of an array stands for every element of it."""
    now = rt.clock.now()
    with rt.write() as session:
        rows = get_rows(session, job_ids, who, "cancelled")
        if whole_arrays:
            rows = _with_their_arrays(session, rows)
        ended = {row.id for row in rows if JobState(row.state).terminal}
        for row in rows:
            if row.id not in ended:
                end_job(session, row, JobState.CANCELLED, now, f"cancelled by {who.user}")
        session.flush()
        return [
            CancelOut.model_construct(**dict(to_out(session, row, rt)), already_ended=row.id in ended) for row in rows
        ]


def _with_their_arrays(session: Session, rows: Sequence[JobRow]) -> list[JobRow]:
    """The jobs, each in an array replaced by every element of that array (by index), each job once."""
    array_of = JobRow.spec["array_id"].as_string()
    arrays = list(dict.fromkeys(a for row in rows if (a := row.spec.get("array_id"))))
    elements: dict[str, list[JobRow]] = defaultdict(list)
    for start in range(0, len(arrays), 500):
        for element in session.scalars(select(JobRow).where(array_of.in_(arrays[start : start + 500]))):
            elements[element.spec["array_id"]].append(element)
    out: dict[str, JobRow] = {}
    for row in rows:
        array_id = row.spec.get("array_id")
        members = sorted(elements[array_id], key=lambda j: j.spec.get("array_index", 0)) if array_id else [row]
        out.update((member.id, member) for member in members)
    return list(out.values())


def _tasks_by_job(session: Session, rows: Sequence[JobRow]) -> dict[str, list[TaskRow]]:
    by_job: dict[str, list[TaskRow]] = defaultdict(list)
    generation = {row.id: row.generation for row in rows}
    ids = list(generation)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for task in session.scalars(select(TaskRow).where(TaskRow.job_id.in_(chunk))):
            if task.generation == generation[task.job_id] or task.state in _STILL_RUNNING:
                by_job[task.job_id].append(task)
    return by_job


# An earlier attempt's tasks in these states are shown too: their processes still hold their GPUs (a
# preempted or requeued job is PENDING while its old tasks stop).
_STILL_RUNNING = frozenset(s.value for s in LIVE_TASK_STATES)


def to_out(session: Session, row: JobRow, rt: HeadRuntime, tasks: list[TaskRow] | None = None) -> JobOut:
    if tasks is None:
        current = or_(TaskRow.generation == row.generation, TaskRow.state.in_(_STILL_RUNNING))
        tasks = list(session.scalars(select(TaskRow).where(TaskRow.job_id == row.id, current)))
    tasks = sorted(tasks, key=lambda t: (t.generation, t.node_rank))
    spec = row.spec
    resources = spec.get("resources", {})
    gpus = row.gpus_per_node
    reason = row.reason
    position = rt.queue_position(row.id) if row.state == JobState.PENDING.value else None
    if position is not None:
        reason = f"{reason}; queue position {position[0]} of {position[1]}"
    return JobOut(
        id=row.id,
        name=row.name,
        state=row.state,
        user=row.user,
        team=row.team,
        priority=row.priority,
        nodes=row.nodes,
        gpus_per_node=int(gpus) if float(gpus).is_integer() else gpus,
        gpu_types=list(row.gpu_types),
        submitted_at=row.submitted_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        exit_code=row.exit_code,
        restarts=row.restarts,
        reason=reason,
        allocation=[
            AllocationOut(node=t.node, gpus=list(t.gpus), gpu_fraction=t.gpu_fraction if t.gpus else 0.0)
            for t in tasks
            if t.generation == row.generation
        ],
        command=spec["command"],
        launcher=spec.get("launcher", "per-node"),
        cpus=resources.get("cpus"),
        memory_mb=resources.get("memory_mb"),
        time_limit_s=spec.get("time_limit_s"),
        max_restarts=spec.get("max_restarts", 0),
        env=spec.get("env", {}),
        workdir=spec.get("workdir"),
        image=spec.get("image"),
        volumes=list(spec.get("volumes", [])),
        checkpoint_dir=str(rt.settings.checkpoints / row.id),
        tasks=[
            TaskOut(
                node_rank=t.node_rank,
                node=t.node,
                state=t.state,
                generation=t.generation,
                exit_code=t.exit_code,
                detail=t.detail,
            )
            for t in tasks
        ],
        preemptible=bool(spec.get("preemptible", False)),
        grace_period_s=spec.get("grace_period_s"),
        preemptions=row.preemptions,
        last_checkpoint_at=row.last_checkpoint_at,
        expected_start=rt.expected_starts.get(row.id) if row.state == JobState.PENDING.value else None,
        array_id=spec.get("array_id"),
        array_index=spec.get("array_index"),
        after_ok=spec.get("after_ok", []),
        after_any=spec.get("after_any", []),
    )
