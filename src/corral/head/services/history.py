"""Service received and expected: the two job fields the ``default`` policy reads, as the simulator fills them.

- ``attained_gpu_s``: the GPU-seconds a job has received over all its runs, as accounting counts
  them (each task: its GPUs × the share it holds of each × the seconds from its start until its
  processes were gone, or until now while they run; a preempted or requeued job keeps what it
  received). The ended runs are summed once and kept; the current run is added at every cycle.
- ``expected_gpu_s``: the median GPU-seconds of the user's, else the team's, most recently ended
  jobs (``FinishedJobs.expected``), taken when the job joins the queue (submitted or requeued) and
  kept while it waits and runs. Jobs already queued or running when a head starts leading get
  theirs then.

The finished jobs are loaded once, when the head starts leading (the most recent ``RECENT`` of
every user and every team), then fed as jobs end: each cycle reads the end events written since the
last one, and those of the last ``LAG_S`` seconds (a transaction may commit after a later one), so
an end written by another head counts too, once. A job is fed once its tasks are gone, with the
GPU-seconds of all its runs; a job that never ran, asked for no GPUs or was a service's replica is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import NamedTuple, cast

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

from corral.head.servicebook import ServiceBook
from corral.head.services.accounting.figures import held_gpu_s
from corral.head.store.tables import EventRow, JobRow, TaskRow
from corral.model import TERMINAL_JOB_STATES, Job
from corral.sched.history import RECENT, FinishedJobs

LAG_S = 60.0
"""How long after its time an end event is still looked for (a transaction may commit late)."""

ENDED_STATES = sorted(s.value for s in TERMINAL_JOB_STATES)
ENDED_EVENTS = [f"job.{state.lower()}" for state in ENDED_STATES]
_CHUNK = 500
_SPARE = 1024  # entries of gone jobs kept before they are swept


class HeldTask(NamedTuple):
    """A live task as the service count needs it."""

    job_id: str
    generation: int
    gpus: int
    fraction: float
    started_at: datetime | None  # None: not started yet


Service = Callable[[str, str, str], tuple[float, float | None]]
"""(job id, user, team) of a job with live tasks → its attained and expected GPU-seconds."""


def fill_pending(
    book: ServiceBook,
    session: Session,
    now: datetime,
    live: Sequence[HeldTask],
    generations: Mapping[str, int],
    pending: tuple[Job, ...],
) -> tuple[tuple[Job, ...], Service]:
    """The pending jobs with their service filled in, and the service of jobs with live tasks.

    Feeds the finished jobs first (load them on the first call), so call it every cycle.
    ``live``: every task that may still hold resources; ``generations``: every pending job's
    current generation (a new one means it joined the queue again)."""
    tasks: dict[str, list[HeldTask]] = {}
    for task in live:
        tasks.setdefault(task.job_id, []).append(task)
    with book.lock:
        finished = _catch_up(book, session, now, tasks)
        _forget_gone(book, generations, tasks)
        keys = {job_id: (max(t.generation for t in held), len(held)) for job_id, held in tasks.items()}
        kept = book.views  # the common case, kept lean: a view made at an earlier cycle
        views = [
            c[2] if (c := kept.get(job.id)) is not None and c[0] is job and c[1] == generations[job.id] else None
            for job in pending
        ]
        missed = [job for job, view in zip(pending, views, strict=True) if view is None]
        keys.update({job.id: (generations[job.id], 0) for job in missed if generations[job.id] > 0})
        _sum_earlier(book, session, keys)
        if missed:
            made = iter([_pending_view(book, finished, job, generations[job.id]) for job in missed])
            views = [view if view is not None else next(made) for view in views]
    return tuple(cast("list[Job]", views)), _running_service(book, finished, tasks, now)  # every view is made


def _pending_view(book: ServiceBook, finished: FinishedJobs, job: Job, generation: int) -> Job:
    known = book.estimates.get(job.id)
    if known is None or known[0] != generation:
        known = book.estimates[job.id] = (generation, finished.expected(job.user, job.team))
    attained = book.earlier[job.id][1] if generation > 0 else 0.0  # a first attempt has not run yet
    same = job.attained_gpu_s == attained and job.expected_gpu_s == known[1]
    view = job if same else replace(job, attained_gpu_s=attained, expected_gpu_s=known[1])
    book.views[job.id] = (job, generation, view)
    return view


def _running_service(
    book: ServiceBook, finished: FinishedJobs, tasks: Mapping[str, list[HeldTask]], now: datetime
) -> Service:
    def service(job_id: str, user: str, team: str) -> tuple[float, float | None]:
        held = tasks[job_id]
        with book.lock:
            known = book.estimates.get(job_id)
            if known is None:  # it joined the queue before this head led
                known = book.estimates[job_id] = (max(t.generation for t in held), finished.expected(user, team))
            earlier = book.earlier[job_id][1]
        current = sum(held_gpu_s(t.gpus, t.fraction, t.started_at, now) for t in held if t.started_at is not None)
        return earlier + current, known[1]

    return service


def _forget_gone(book: ServiceBook, pending: Mapping[str, int], live: Mapping[str, object]) -> None:
    """Drop what is kept of jobs that neither wait nor hold anything any more (now and then: it is a pass
    over every job)."""
    if len(book.estimates) + len(book.views) <= 2 * (len(pending) + len(live)) + _SPARE:
        return
    for kept in (book.estimates, book.earlier, book.views):
        for job_id in [j for j in kept if j not in pending and j not in live]:
            del kept[job_id]


def _sum_earlier(book: ServiceBook, session: Session, keys: Mapping[str, tuple[int, int]]) -> None:
    """GPU-seconds of the ended tasks of every job whose runs changed since they were last summed."""
    stale = [job_id for job_id, key in keys.items() if book.earlier.get(job_id, (None,))[0] != key]
    sums = ended_gpu_s(session, stale)
    for job_id in stale:
        book.earlier[job_id] = (keys[job_id], sums.get(job_id, 0.0))


def ended_gpu_s(session: Session, job_ids: Sequence[str]) -> dict[str, float]:
    """Each job's GPU-seconds over its tasks whose processes are gone (as accounting counts them)."""
    out: dict[str, float] = {}
    for start in range(0, len(job_ids), _CHUNK):
        rows = session.execute(
            select(TaskRow.job_id, TaskRow.gpus, TaskRow.gpu_fraction, TaskRow.started_at, TaskRow.finished_at).where(
                TaskRow.job_id.in_(job_ids[start : start + _CHUNK]),
                TaskRow.started_at.is_not(None),
                TaskRow.finished_at.is_not(None),
            )
        ).all()
        for job_id, gpus, fraction, started, ended in rows:
            out[job_id] = out.get(job_id, 0.0) + held_gpu_s(len(gpus), fraction, started, ended)
    return out


def _catch_up(book: ServiceBook, session: Session, now: datetime, live: Mapping[str, object]) -> FinishedJobs:
    """Load the history (first cycle) or read the jobs that ended since; feed those whose tasks are gone."""
    horizon = now - timedelta(seconds=LAG_S)
    top = session.scalar(select(func.max(EventRow.id))) or 0
    if book.finished is None:
        book.finished = FinishedJobs()
        _note_ended(book, _recent_ended(session))
    else:
        _note_ended(book, _ended_since(session, book.event_id, top, horizon, book.ended))
    book.event_id = top
    settled = [job_id for job_id in book.unsettled if job_id not in live]
    if settled:
        sums = ended_gpu_s(session, settled)
        for job_id in settled:
            user, team = book.unsettled.pop(job_id)
            book.finished.add(user, team, sums.get(job_id, 0.0))
    for job_id in [j for j, at in book.ended.items() if at < horizon]:
        del book.ended[job_id]
    return book.finished


def _note_ended(book: ServiceBook, rows: Iterable[tuple[str, str, str, datetime]]) -> None:
    for job_id, user, team, ended_at in rows:
        if job_id not in book.ended:
            book.ended[job_id] = ended_at
            book.unsettled[job_id] = (user, team)


def _counted() -> list[ColumnElement[bool]]:
    """Which ended jobs the history takes: those that ran, asking for GPUs, and not as a service's
    replica (it runs as long as the service is wanted: nothing like a batch job's size)."""
    return [
        JobRow.state.in_(ENDED_STATES),
        JobRow.started_at.is_not(None),
        JobRow.gpus_per_node > 0,
        JobRow.spec["env"]["CORRAL_SERVICE"].as_string().is_(None),  # a replica's job carries its service
    ]


def _recent_ended(session: Session) -> list[tuple[str, str, str, datetime]]:
    """The most recent ``RECENT`` ended jobs of every user and of every team, oldest first."""
    newest = (JobRow.finished_at.desc(), JobRow.seq.desc())
    ranked = (
        select(
            JobRow.id,
            JobRow.user,
            JobRow.team,
            JobRow.finished_at,
            JobRow.seq,
            func.row_number().over(partition_by=JobRow.user, order_by=newest).label("by_user"),
            func.row_number().over(partition_by=JobRow.team, order_by=newest).label("by_team"),
        )
        .where(*_counted())
        .subquery()
    )
    rows = session.execute(
        select(ranked.c.id, ranked.c.user, ranked.c.team, ranked.c.finished_at)
        .where(or_(ranked.c.by_user <= RECENT, ranked.c.by_team <= RECENT))
        .order_by(ranked.c.finished_at, ranked.c.seq)
    ).all()
    return [(r.id, r.user, r.team, r.finished_at) for r in rows]


def _ended_since(
    session: Session, after_id: int, top: int, since: datetime, known: Mapping[str, datetime]
) -> list[tuple[str, str, str, datetime]]:
    """Jobs not ``known`` whose end event came after event ``after_id`` (up to ``top``) or is at
    ``since`` or later (one committed after a later one), in the order they ended."""
    ended = select(EventRow.id, EventRow.job_id, EventRow.ts).where(EventRow.kind.in_(ENDED_EVENTS))
    found = {  # two range scans (one with OR would scan the whole table)
        row.id: (row.ts, row.job_id)
        for query in (ended.where(EventRow.id.between(after_id + 1, top)), ended.where(EventRow.ts >= since))
        for row in session.execute(query)
    }
    events = [(job_id, ts) for _, (ts, job_id) in sorted(found.items(), key=lambda item: (item[1][0], item[0]))]
    ids = [job_id for job_id, _ in events if job_id is not None and job_id not in known]
    owners: dict[str, tuple[str, str]] = {}
    for start in range(0, len(ids), _CHUNK):
        query = select(JobRow.id, JobRow.user, JobRow.team).where(JobRow.id.in_(ids[start : start + _CHUNK]))
        owners.update({r.id: (r.user, r.team) for r in session.execute(query.where(*_counted()))})
    return [(job_id, *owners[job_id], ts) for job_id, ts in events if job_id in owners]
