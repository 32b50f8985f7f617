"""Which pending jobs may be scheduled now: dependencies met, and room in their array.

A job with ``after_ok`` waits until every listed job SUCCEEDED and is cancelled as soon as one
ends otherwise; one with ``after_any`` waits until every listed job has ended. A listed array id
(the first element's id) stands for every element of the array. An array element waits while
``array_limit`` elements of its array hold resources (RUNNING, placed and starting, or ended but
with processes still stopping); among its waiting elements, those submitted first go first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.jobcache import Gate
from corral.head.store.tables import JobRow, TaskRow
from corral.model import Job, JobState, TaskState
from corral.sched.describe import plural

_CHUNK = 500
# Task states whose processes may still exist: live ones, and lost ones until they are surely fenced.
_MAYBE_LIVE = [*(s.value for s in TaskState if s.live), TaskState.LOST.value]


@dataclass
class Gated:
    runnable: tuple[Job, ...]
    held: dict[str, str] = field(default_factory=dict)  # job id → what it waits for
    doomed: dict[str, str] = field(default_factory=dict)  # job id → why it can never run
    # Elements held back for their array's earlier elements that may start now: see ``array_reason``.
    array_waits: dict[str, ArrayWait] = field(default_factory=dict)


@dataclass(frozen=True)
class ArrayWait:
    """An element held back for its array's limit: the elements holding resources, and those let go first."""

    array_id: str
    limit: int
    holding: int
    first: tuple[str, ...]  # elements submitted earlier, which may start in this cycle


def array_reason(wait: ArrayWait, placed: Collection[str] = ()) -> str:
    """Why the element waits, once the cycle has placed ``placed``: its limit is reached, or the
    elements submitted earlier still wait to start."""
    holding = wait.holding + sum(1 for job_id in wait.first if job_id in placed)
    if holding >= wait.limit:
        return f"array {wait.array_id} already has {plural(holding, 'element')} holding resources (its limit)"
    before = ", ".join(job_id for job_id in wait.first if job_id not in placed)
    return (
        f"array {wait.array_id} lets {plural(wait.limit, 'element')} hold resources at once and has {holding}"
        f" holding them; its elements submitted earlier start first ({before})"
    )


def gate(session: Session, pending: Sequence[Job], gates: Mapping[str, Gate], busy: Collection[str]) -> Gated:
    """Split ``pending`` (in any order) into jobs to schedule, jobs held back, and jobs to cancel."""
    closed = [job for job in pending if job.id in gates]
    if not closed:
        return Gated(runnable=tuple(pending))
    out = Gated(runnable=())
    listed = {d for j in closed for d in (*gates[j.id].after_ok, *gates[j.id].after_any)}
    states, elements = _states(session, listed), _elements(session, listed)
    for job in closed:
        _check_dependencies(job.id, gates[job.id], states, elements, out)
    _check_arrays(session, [j for j in sorted(closed, key=lambda j: j.seq) if j.id not in out.held], gates, busy, out)
    blocked = out.held.keys() | out.doomed.keys()
    out.runnable = tuple(job for job in pending if job.id not in blocked)
    return out


def _check_dependencies(
    job_id: str, gate: Gate, states: Mapping[str, str], elements: Mapping[str, list[tuple[str, str]]], out: Gated
) -> None:
    for dep in gate.after_ok:
        if dep not in states:
            out.doomed[job_id] = f"dependency {dep} no longer exists"
            return
        for member, state in elements.get(dep) or [(dep, states[dep])]:
            if JobState(state).terminal and state != JobState.SUCCEEDED.value:
                what = f"dependency {dep}" if member == dep else f"dependency {dep} (an array): its element {member}"
                out.doomed[job_id] = f"{what} ended {state}; after_ok needs every dependency to succeed"
                return
    waiting = []
    for dep in dict.fromkeys((*gate.after_ok, *gate.after_any)):
        members = elements.get(dep) or ([(dep, states[dep])] if dep in states else [])
        running = [member for member, state in members if not JobState(state).terminal]
        if len(members) > 1 and running:
            waiting.append(f"{dep} (an array: {len(running)} of its {len(members)} elements not ended)")
        elif running:
            waiting.append(f"{dep} ({states[dep]})")
    if waiting:
        what = "dependency" if len(waiting) == 1 else "dependencies"
        out.held[job_id] = f"waiting for {what} {', '.join(waiting)}"


def _check_arrays(
    session: Session, candidates: Sequence[Job], gates: Mapping[str, Gate], busy: Collection[str], out: Gated
) -> None:
    arrays = {gates[j.id].array_id for j in candidates if gates[j.id].array_id and gates[j.id].array_limit}
    if not arrays:
        return
    live = _live_elements(session, sorted(a for a in arrays if a), busy)
    first: dict[str, list[str]] = {}  # per array, its waiting elements let go this cycle, first submitted first
    for job in candidates:
        array_id, limit = gates[job.id].array_id, gates[job.id].array_limit
        if not array_id or not limit:
            continue
        going = first.setdefault(array_id, [])
        wait = ArrayWait(array_id, limit, live.get(array_id, 0), tuple(going))
        if wait.holding + len(going) >= limit:
            out.held[job.id] = array_reason(wait)
            if going:
                out.array_waits[job.id] = wait
        else:
            going.append(job.id)  # this one may start now


def _elements(session: Session, ids: Collection[str]) -> dict[str, list[tuple[str, str]]]:
    """For each id that names an array (its first element's id): (element id, state) of every element."""
    array_of = JobRow.spec["array_id"].as_string()
    ordered = sorted(ids)
    found: dict[str, list[tuple[str, str]]] = {}
    for start in range(0, len(ordered), _CHUNK):
        query = select(JobRow.id, JobRow.state, array_of).where(array_of.in_(ordered[start : start + _CHUNK]))
        for job_id, state, array_id in session.execute(query.order_by(JobRow.seq)):
            found.setdefault(array_id, []).append((job_id, state))
    return found


def _states(session: Session, ids: Collection[str]) -> dict[str, str]:
    ordered = sorted(ids)
    states: dict[str, str] = {}
    for start in range(0, len(ordered), _CHUNK):
        chunk = ordered[start : start + _CHUNK]
        rows = session.execute(select(JobRow.id, JobRow.state).where(JobRow.id.in_(chunk))).all()
        states.update((job_id, state) for job_id, state in rows)
    return states


def _live_elements(session: Session, arrays: Sequence[str], busy: Collection[str]) -> dict[str, int]:
    """Elements of each array holding resources: RUNNING, or with tasks whose processes may still exist
    (``busy``) whatever the element's state: a cancelled element holds its GPUs until they are gone."""
    array_of = JobRow.spec["array_id"].as_string()
    running = select(JobRow.id, array_of).where(array_of.in_(arrays), JobRow.state == JobState.RUNNING.value)
    with_tasks = (
        select(JobRow.id, array_of)
        .join(TaskRow, TaskRow.job_id == JobRow.id)
        .where(array_of.in_(arrays), TaskRow.state.in_(_MAYBE_LIVE))
        .distinct()
    )
    holding: dict[str, str] = {job_id: array_id for job_id, array_id in session.execute(running)}
    holding.update((job_id, array_id) for job_id, array_id in session.execute(with_tasks) if job_id in busy)
    live: dict[str, int] = {}
    for array_id in holding.values():
        live[array_id] = live.get(array_id, 0) + 1
    return live
