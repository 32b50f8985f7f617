"""Node liveness and job time limits: the checks that run on the clock, not on requests."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from sqlalchemy import and_, or_, select

from corral.head.leader import still_leading
from corral.head.runtime import HeadRuntime
from corral.head.services.agents import write_heard
from corral.head.services.common import bump_node, record_event, wake_scheduler
from corral.head.services.lifecycle import FAILING, LIVE_TASK_STATES, end_failing, end_job, stop_grace, task_lost
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import JobState, NodeState, TaskState


def check_nodes(rt: HeadRuntime, watching_since: datetime | None = None) -> list[str]:
    """Declare nodes without a heartbeat for the node timeout NOT_READY; their tasks are lost. Returns
    the nodes declared.

    Only the agent's silence counts, never the head's: a node whose heartbeat the head holds and has
    not answered yet (it waits for a thread or the database) is not silent, its silence counts from
    when its last heartbeat arrived or was answered, whichever is later, and the spans in which the
    head's event loop did not run (``corral.head.lateness``) are taken off it.

    ``watching_since``: when this head began to watch (it started, or took over the lead). Silence
    counts only from then: while no head ran, agents had no one to answer them, and a head that was
    down longer than the node timeout must not declare every node lost before they reach it again."""
    # The time is read first: a heartbeat that arrived by then, and waits with this check for the
    # write lock behind a long transaction, is written first (the lock is first come, first served)
    # and counts, however long the wait. The head's own stall is no node's silence.
    now, mono = rt.clock.now(), time.monotonic()
    write_heard(rt)  # quiet heartbeats this head answered from memory count too
    deadline = now - timedelta(seconds=rt.settings.node_timeout_s)
    if watching_since is not None and watching_since > deadline:
        return []
    live = [s.value for s in LIVE_TASK_STATES]
    # A node already NOT_READY counts too while tasks there are live: its agent said it was leaving
    # (stopping them, heartbeating through their grace period) and then fell silent before it was done.
    with_live_tasks = NodeRow.name.in_(select(TaskRow.node).where(TaskRow.state.in_(live)))
    with rt.read() as session:
        late = list(
            session.scalars(
                select(NodeRow.name).where(
                    or_(NodeRow.state != NodeState.NOT_READY.value, with_live_tasks),
                    NodeRow.last_heartbeat < deadline,
                )
            )
        )
    late = [name for name in late if not rt.quiet.heard_after(name, deadline)]
    if not late:
        return []
    declared: list[str] = []
    with rt.write() as session:
        if not still_leading(session, rt.db):  # fencing: only the leader declares nodes lost
            return []
        for name in late:
            row = session.get(NodeRow, name)
            if row is None or row.last_heartbeat is None or row.last_heartbeat >= deadline:
                continue  # heard from since it was read: not lost
            silent = (now - row.last_heartbeat).total_seconds()
            deaf = rt.lateness.deaf_within(silent, mono)
            if silent - deaf < rt.settings.node_timeout_s or rt.quiet.heard_after(name, deadline):
                continue  # the head was late, not the agent silent
            declared.append(name)
            why = f"no heartbeat for {silent:.0f}s (node timeout {rt.settings.node_timeout_s:.0f}s)"
            if deaf >= 0.5:
                why = f"no heartbeat for {silent:.0f}s, {deaf:.0f}s of it while the head itself stalled " + (
                    f"(node timeout {rt.settings.node_timeout_s:.0f}s)"
                )
            if row.state != NodeState.NOT_READY.value:
                row.state = NodeState.NOT_READY.value
                row.reason = why
                bump_node(session, name)  # its next heartbeat is handled in full, and told
                record_event(session, now, "node.not_ready", why, node=name)
            # The node's agent stops its tasks once its lease runs out; until then they may still run.
            fenced_after = row.last_heartbeat + timedelta(seconds=rt.settings.agent_lease_s)
            for task in session.scalars(select(TaskRow).where(TaskRow.node == name, TaskRow.state.in_(live))):
                job = session.scalar(select(JobRow).where(JobRow.id == task.job_id))
                if job is not None:
                    task.fenced_after = fenced_after  # first: a job failing for good waits for it too
                    task_lost(session, task, job, now, f"node {name} stopped answering: {why}")
                    if job.state == JobState.PENDING.value and fenced_after > now:
                        job.reason += (
                            f"; starts again once {name}'s agent has surely stopped it "
                            f"(its lease ends {fenced_after:%H:%M:%S} UTC)"
                        )
            wake_scheduler(session)
    return declared


def end_fenced_failures(rt: HeadRuntime) -> list[str]:
    """Jobs that failed for good while a task of theirs was lost with its node end FAILED once that node's
    agent has surely stopped it (its lease ran out, or it said so), not while its processes may still run."""
    now = rt.clock.now()
    # Leases that ran out since the last look (a minute of margin); all of them the first time this head
    # looks, and after a stall of the head too, so that none is missed.
    since = rt.fenced_checked_at
    recent = TaskRow.fenced_after <= now
    if since is not None:
        recent = and_(recent, TaskRow.fenced_after > since - timedelta(minutes=1))
    fenced = select(TaskRow.job_id).where(TaskRow.state == TaskState.LOST.value, recent)
    live = [JobState.PENDING.value, JobState.RUNNING.value]
    with rt.read() as session:
        failing = select(JobRow.id).where(
            JobRow.id.in_(fenced), JobRow.state.in_(live), JobRow.reason.contains(FAILING)
        )
        ids = list(session.scalars(failing))
    if ids:
        with rt.write() as session:
            if not still_leading(session, rt.db):
                return []
            for job in session.scalars(select(JobRow).where(JobRow.id.in_(ids))):
                end_failing(session, job, now)
    rt.fenced_checked_at = now
    return ids


def check_time_limits(rt: HeadRuntime) -> list[str]:
    """End RUNNING jobs that passed their time limit with state TIMEOUT."""
    now = rt.clock.now()
    with rt.read() as session:
        running = list(session.scalars(select(JobRow).where(JobRow.state == JobState.RUNNING.value)))
    over = [
        job.id
        for job in running
        if job.spec.get("time_limit_s")
        and job.started_at is not None
        and (now - job.started_at).total_seconds() > float(job.spec["time_limit_s"])
    ]
    if not over:
        return []
    with rt.write() as session:
        if not still_leading(session, rt.db):  # fencing: only the leader ends jobs on the clock
            return []
        for job_id in over:
            job = session.scalar(select(JobRow).where(JobRow.id == job_id))
            if job is not None and job.state == JobState.RUNNING.value:
                limit = float(job.spec["time_limit_s"])
                grace = stop_grace(job.spec, rt.settings.preempt_grace_s)
                end_job(
                    session,
                    job,
                    JobState.TIMEOUT,
                    now,
                    f"exceeded its time limit of {_human(limit)} (SIGTERM, then SIGKILL after {_human(grace)})",
                    grace_s=grace,
                )
    return over


def _human(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
