"""Job and task lifecycle: what happens when tasks start, exit or are lost.

Every function runs inside the caller's write transaction. A job is RUNNING only
when every task of its current generation runs; one failing task tears the gang
down, then the job is requeued (restarts left) or ends FAILED.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, delete, or_, select
from sqlalchemy.orm import Session

from corral.head.services.common import bump_node, record_event, wake_scheduler
from corral.head.store.tables import GpuClaimRow, JobRow, TaskRow
from corral.model import JobState, TaskState, check_job_transition, describe_exit

LIVE_TASK_STATES = (TaskState.ASSIGNED, TaskState.RUNNING, TaskState.STOPPING)
WANTED_TASK_STATES = (TaskState.ASSIGNED, TaskState.RUNNING)


def current_tasks(session: Session, job: JobRow) -> list[TaskRow]:
    return list(
        session.scalars(
            select(TaskRow)
            .where(TaskRow.job_id == job.id, TaskRow.generation == job.generation)
            .order_by(TaskRow.node_rank)
        )
    )


def attempt_tasks(session: Session, job: JobRow, task: TaskRow) -> list[TaskRow]:
    """The tasks of the job's current attempt, which includes ``task``: just that one for a one-node job."""
    if job.nodes == 1 and task.generation == job.generation:
        return [task]
    return current_tasks(session, job)


def set_job_state(session: Session, job: JobRow, state: JobState, now: datetime, reason: str) -> None:
    check_job_transition(JobState(job.state), state)
    old = job.state
    job.state = state.value
    job.reason = reason
    if state is JobState.RUNNING:
        job.started_at = now
        if job.restarts == 0:
            session.info.setdefault("job_waits", []).append((now - job.submitted_at).total_seconds())
    if state.terminal:
        job.finished_at = now
    record_event(session, now, "job." + state.value.lower(), reason, job_id=job.id, previous=old)


_CLAIMS_PENDING = "gpu_claims_pending"


def add_claims(session: Session, claims: list[GpuClaimRow]) -> None:
    """Add GPU claims to the transaction. ``release`` deletes claims by statement, so it writes pending
    ones first; this says there are some (looking through every new row for one would cost each release
    as much as the transaction has added so far: a heartbeat ending thousands of tasks took seconds)."""
    session.add_all(claims)
    if claims:
        session.info[_CLAIMS_PENDING] = True


def release(
    session: Session, task: TaskRow, state: TaskState, now: datetime, exit_code: int | None, detail: str
) -> None:
    """The task's processes are gone (or its node is): free its GPUs."""
    task.state = state.value
    task.exit_code = exit_code
    task.detail = detail
    task.finished_at = now
    if session.info.pop(_CLAIMS_PENDING, False):
        session.flush()  # claims added in this transaction must be written before they can be deleted
    # A Core statement: the ORM's would first flush everything pending and look through the session.
    claims = cast(Table, GpuClaimRow.__table__)
    session.connection().execute(delete(claims).where(claims.c.task_id == task.id))
    held = f" GPUs {','.join(map(str, task.gpus))}" if task.gpus else ""
    record_event(
        session,
        now,
        "task.released",
        f"node rank {task.node_rank} on {task.node} released{held}: {detail or state.value.lower()}",
        job_id=task.job_id,
        node=task.node,
        task=task.id,
        gpus=list(task.gpus),
        state=state.value,
    )
    wake_scheduler(session)


def stop_tasks(session: Session, job: JobRow, now: datetime, grace_s: float | None = None) -> None:
    """Ask the agents to stop every wanted task of the job (SIGTERM, grace, SIGKILL).

    ``grace_s`` overrides the grace period the tasks were started with (None keeps it)."""
    for task in session.scalars(
        select(TaskRow).where(TaskRow.job_id == job.id, TaskRow.state.in_([s.value for s in WANTED_TASK_STATES]))
    ):
        if task.node_rank > 0 and task.master_port == 0:  # never handed to its agent: nothing to stop
            release(session, task, TaskState.EXITED, now, None, "stopped before it started")
            continue
        task.state = TaskState.STOPPING.value
        task.stop_grace_s = grace_s
        task.assigned_version = bump_node(session, task.node)


def stop_grace(spec: Mapping[str, Any], default_s: float) -> float:
    """The job's own grace period (from its stored spec) when it set one, else ``default_s``."""
    own = spec.get("grace_period_s")
    return default_s if own is None else float(own)


def preempt(session: Session, job: JobRow, now: datetime, reason: str, grace_s: float) -> None:
    """Stop the job (SIGTERM, ``grace_s`` to checkpoint, SIGKILL) and queue it again.

    A preemption starts a new attempt (``restarts`` + 1, a new generation) but does not use
    up ``max_restarts``: ``preemptions`` counts it apart."""
    stop_tasks(session, job, now, stop_grace(job.spec, grace_s))
    job.restarts += 1
    job.preemptions += 1
    job.generation += 1
    job.exit_code = None
    set_job_state(session, job, JobState.PENDING, now, reason)
    record_event(session, now, "job.preempted", reason, job_id=job.id)
    wake_scheduler(session)


def failures_left(job: JobRow) -> int:
    """Requeues after failure or node loss still allowed; preemptions do not count."""
    return int(job.spec.get("max_restarts", 0)) - (job.restarts - job.preemptions)


def end_job(
    session: Session,
    job: JobRow,
    state: JobState,
    now: datetime,
    reason: str,
    exit_code: int | None = None,
    grace_s: float | None = None,
) -> None:
    """Finish a job for good and tear its tasks down."""
    job.exit_code = exit_code
    set_job_state(session, job, state, now, reason)
    stop_tasks(session, job, now, grace_s)


def requeue(session: Session, job: JobRow, now: datetime, reason: str) -> None:
    """Tear the current attempt down and queue a new one (a new generation)."""
    stop_tasks(session, job, now)
    job.restarts += 1
    job.generation += 1
    job.exit_code = None
    set_job_state(session, job, JobState.PENDING, now, reason)
    wake_scheduler(session)


def fail_or_requeue(session: Session, job: JobRow, now: datetime, why: str, exit_code: int | None) -> None:
    """One task failed or was lost: tear the gang down, then requeue or fail the job."""
    if JobState(job.state).terminal:
        return
    spec_restarts = int(job.spec.get("max_restarts", 0))
    if failures_left(job) > 0:
        used = job.restarts - job.preemptions
        requeue(session, job, now, f"requeued (restart {used + 1} of {spec_restarts}): {why}")
    else:
        stop_tasks(session, job, now)
        job.exit_code = exit_code
        suffix = f"; no restarts left (max_restarts={spec_restarts})" if spec_restarts else ""
        if _live_tasks(session, job, now):  # its other ranks take their grace period first
            job.reason = why + suffix + FAILING
        else:
            set_job_state(session, job, JobState.FAILED, now, why + suffix)


FAILING = "; it ends FAILED once its other ranks have stopped"
"""Ends the reason of a job that failed while other ranks of its attempt still stop: it stays as it was
(RUNNING, or PENDING with tasks) until the last of them is gone, then ends ``FAILED`` (``end_failing``)."""


def _live_tasks(session: Session, job: JobRow, now: datetime) -> bool:
    """Whether processes of the job's current attempt may still run: a task is live, or was lost with its
    node, whose agent has not surely stopped it yet (its lease runs until ``fenced_after``)."""
    live = [s.value for s in LIVE_TASK_STATES]
    fencing = and_(TaskRow.state == TaskState.LOST.value, TaskRow.fenced_after > now)
    query = select(TaskRow.id).where(
        TaskRow.job_id == job.id, TaskRow.generation == job.generation, or_(TaskRow.state.in_(live), fencing)
    )
    return session.scalar(query.limit(1)) is not None


def end_failing(session: Session, job: JobRow, now: datetime) -> None:
    """A failing job (``FAILING``) whose other ranks have all stopped ends FAILED."""
    if FAILING in job.reason and not JobState(job.state).terminal and not _live_tasks(session, job, now):
        set_job_state(session, job, JobState.FAILED, now, job.reason.replace(FAILING, ""))


def task_running(session: Session, task: TaskRow, job: JobRow, now: datetime) -> None:
    if task.state != TaskState.ASSIGNED.value:
        return
    task.state = TaskState.RUNNING.value
    task.started_at = now
    if job.state == JobState.PENDING.value and job.generation == task.generation:
        tasks = attempt_tasks(session, job, task)
        if all(t.state == TaskState.RUNNING.value for t in tasks):
            nodes = ", ".join(sorted({t.node for t in tasks}))
            set_job_state(session, job, JobState.RUNNING, now, f"running on {nodes}")


def task_exited(
    session: Session,
    task: TaskRow,
    job: JobRow,
    now: datetime,
    exit_code: int | None,
    detail: str,
    interrupted: bool = False,
) -> None:
    """A task's processes are gone. ``interrupted``: its agent stopped it while shutting down, which
    says nothing of the job, so the job is queued again whatever its restart budget."""
    was_wanted = task.state in (TaskState.ASSIGNED.value, TaskState.RUNNING.value)
    release(session, task, TaskState.EXITED, now, exit_code, detail)
    end_failing(session, job, now)
    if not was_wanted or job.generation != task.generation or JobState(job.state).terminal:
        return
    if interrupted:
        requeue(session, job, now, f"requeued: node rank {task.node_rank} was stopped on node {task.node} ({detail})")
        return
    if exit_code == 0:
        tasks = attempt_tasks(session, job, task)
        if all(t.state == TaskState.EXITED.value and t.exit_code == 0 for t in tasks):
            if job.state == JobState.PENDING.value:  # finished before every rank was seen running
                job.started_at = job.started_at or task.started_at or now
            job.exit_code = 0
            set_job_state(session, job, JobState.SUCCEEDED, now, "all tasks exited 0")
        return
    fail_or_requeue(session, job, now, _failure(task, job, exit_code, detail), exit_code)


def task_failing(session: Session, task: TaskRow, job: JobRow, now: datetime, exit_code: int, detail: str) -> None:
    """A process of a running task failed while the task's other processes still stop (one per GPU): the
    gang is torn down now, as when the whole task has exited; the task stays live until its agent reports
    it gone."""
    if task.state != TaskState.RUNNING.value or job.generation != task.generation or JobState(job.state).terminal:
        return
    fail_or_requeue(session, job, now, _failure(task, job, exit_code, detail), exit_code)


def _failure(task: TaskRow, job: JobRow, exit_code: int | None, detail: str) -> str:
    """Why a job's attempt failed, when ``task`` failed with ``exit_code`` (and its agent's ``detail``)."""
    plain = "no exit code" if exit_code is None else describe_exit(exit_code)  # as the agent's detail says it
    said = plain if exit_code is None or plain.startswith("exit code") else f"{plain} (exit code {exit_code})"
    why = f"node rank {task.node_rank} on node {task.node} failed: {said}"
    if detail.startswith(plain):
        why += detail[len(plain) :]  # the agent's detail adds to the same words (which process failed)
    elif detail:
        why += f" ({detail})"
    if job.spec.get("image") is not None and exit_code in _RUNTIME_CODES:
        why += f"; {_RUNTIME_CODES[exit_code]}: `corral logs {job.id}` says which"
    elif exit_code in _SHELL_CODES and not detail.startswith("could not start"):  # the agent's own failure
        why += f"; {_SHELL_CODES[exit_code]}: check the command, and `corral logs {job.id}`"
    return why


# What a shell's own exit codes mean: the job's command never ran.
_SHELL_CODES = {126: "the shell found the command but could not run it", 127: "the shell found no such command"}
# A job with an image: the container runtime exits with these for its own failures too (docker, podman).
_RUNTIME_CODES = {
    125: "the container runtime failed before the command ran",
    126: "the container runtime, or the image's shell, could not run the command",
    127: "the container runtime, or the image's shell, found no such command",
}


def task_lost(session: Session, task: TaskRow, job: JobRow, now: datetime, why: str) -> None:
    was_wanted = task.state in (TaskState.ASSIGNED.value, TaskState.RUNNING.value)
    stopping = task.state == TaskState.STOPPING.value
    release(session, task, TaskState.LOST, now, None, why)
    end_failing(session, job, now)
    if was_wanted and job.generation == task.generation:
        fail_or_requeue(session, job, now, f"node rank {task.node_rank} lost: {why}", None)
    elif stopping and _ended_by_a_sibling(job, task):
        # A node that dies outright cuts its gang's connections first: another rank then fails and is
        # blamed, and this node is found lost only later. Say so beside what ended the attempt.
        cause, then, rest = job.reason.partition(THEN)
        job.reason = f"{cause}; node {task.node} (node rank {task.node_rank}) was lost meanwhile: {why}{then}{rest}"


def _ended_by_a_sibling(job: JobRow, task: TaskRow) -> bool:
    """Whether the attempt of ``task`` ended (failed, or requeued) because another of its ranks failed."""
    failed_now = job.generation == task.generation and (job.state == JobState.FAILED.value or FAILING in job.reason)
    requeued = job.generation == task.generation + 1 and job.reason.startswith("requeued")
    return (failed_now or requeued) and "failed:" in job.reason.partition(THEN)[0]


REQUEUE_CAUSES = ("requeued", "preempted by")
"""How the reason of a job put back in the queue begins (``requeue``, ``preempt``)."""
THEN = "; now "


def with_requeue_cause(known: str | None, message: str) -> str:
    """A waiting job's reason; for a job put back in the queue, led by why it was (until it starts again), so
    that the requeue stays readable in its reason: ``preempted by job J (…); now waiting for …``."""
    if known is None or not known.startswith(REQUEUE_CAUSES):
        return message
    return f"{known.split(THEN, 1)[0]}{THEN}{message}"


def record_checkpoint(job: JobRow, when: datetime) -> None:
    """Keep the newest checkpoint time of the job's current attempt (it never goes back)."""
    started = job.started_at
    if started is not None and when < started and job.state == JobState.RUNNING.value:
        return  # saved by an earlier attempt: this one has not checkpointed yet
    if job.last_checkpoint_at is None or when > job.last_checkpoint_at:
        job.last_checkpoint_at = when
