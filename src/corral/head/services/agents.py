"""Agents: registration, heartbeats with task reports, and the desired state of each node."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from corral.api import (
    DesiredState,
    HeartbeatRequest,
    RegisterRequest,
    RegisterResponse,
    TaskReport,
)
from corral.head.quiet import report_key
from corral.head.runtime import HeadRuntime
from corral.head.security import hash_token, new_token, same_token
from corral.head.services import health
from corral.head.services.common import Conflict, NotAllowed, NotFound, bump_node, record_event, wake_scheduler
from corral.head.services.desired import desired_json, desired_state, handed_out
from corral.head.services.lifecycle import (
    LIVE_TASK_STATES,
    record_checkpoint,
    release,
    task_exited,
    task_failing,
    task_lost,
    task_running,
)
from corral.head.services.nodes import agent_left_reason
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import NodeState, TaskState


def register(rt: HeadRuntime, req: RegisterRequest) -> RegisterResponse:
    """(Re-)register a node. Tasks it reports running are kept, ones it reports ended (while its agent
    was away) get their exit status, and live tasks it no longer has are lost: their jobs requeued or failed."""
    write_heard(rt)  # quiet heartbeats answered from memory: the node may be live though its row is not yet
    now = rt.clock.now()
    token = new_token("cn")
    with rt.write() as session:
        row = session.get(NodeRow, req.name)
        if row is not None:
            _check_not_held(rt, row, req.node_token, now)
        gpus = [g.model_dump() for g in sorted(req.gpus, key=lambda g: g.index)]
        if row is None:
            row = NodeRow(
                drained=False,
                drain_reason="",
                name=req.name,
                registered_at=now,
                desired_version=0,
                state=NodeState.READY.value,
                labels={},
                gpus=[],
                cpus=0,
                memory_mb=0,
                token_hash="",
                reason="",
                last_heartbeat=now,
            )
            session.add(row)
            record_event(session, now, "node.registered", f"node {req.name} joined", node=req.name)
        else:
            record_event(session, now, "node.reregistered", f"node {req.name} registered again", node=req.name)
        row.gpus, row.labels, row.cpus, row.memory_mb = gpus, dict(req.labels), req.cpus, req.memory_mb
        row.address, row.gpu_source, row.token_hash = req.advertise_addr, req.gpu_source, hash_token(token)
        row.container_runtime = req.container_runtime
        row.last_heartbeat = now
        row.state = NodeState.DRAINED.value if row.drained else NodeState.READY.value
        row.reason = row.drain_reason if row.drained else ""
        session.flush()
        bump_node(session, req.name)  # a new credential: what any head remembers of the node is void
        rt.quiet.forget(req.name)
        exited = [r for r in req.running if r.state == "EXITED"]  # ended while no agent watched: exit status known
        tasks, jobs = _rows_reported(session, exited)
        for report in exited:
            _apply_report(session, req.name, report, now, tasks.get(report.task_id), jobs)
        still_running = {(r.task_id, r.generation) for r in req.running if r.state != "EXITED"}
        for task in _live_tasks(session, req.name):
            if (task.id, task.generation) in still_running or task.state == TaskState.ASSIGNED.value:
                continue  # assigned but never started: the desired state below hands it over
            if task.state == TaskState.STOPPING.value:
                release(session, task, TaskState.EXITED, now, None, "stopped: its node restarted")
            else:
                _lose(session, task, now, f"node {req.name} restarted and no longer runs it")
        # A registering agent has stopped every task it does not report: nothing is left to fence. One
        # it reports (an agent restart found it still running) is fenced once the agent reports it gone.
        session.execute(
            update(TaskRow)
            .where(TaskRow.node == req.name, TaskRow.state == TaskState.LOST.value, TaskRow.fenced_after > now)
            .where(TaskRow.id.not_in({task_id for task_id, _ in still_running}))
            .values(fenced_after=now)
        )
        wake_scheduler(session)
        session.flush()
        session.refresh(row, ["desired_version"])
        desired = desired_state(session, rt, row)
    return RegisterResponse(
        node=req.name,
        node_token=token,
        heartbeat_interval_s=rt.settings.heartbeat_interval_s,
        lease_s=rt.settings.agent_lease_s,
        desired=desired,
    )


def authenticate_node(session: Session, node: str, token: str) -> NodeRow:
    row = session.get(NodeRow, node)
    if row is None:
        raise NotFound(f"no node {node!r}; register first")
    if not same_token(token, row.token_hash):
        raise NotAllowed(f"bad credential for node {node!r}; register again")
    return row


def heartbeat(rt: HeadRuntime, node: str, token: str, req: HeartbeatRequest) -> bytes:
    """Handle a heartbeat in full; the node's desired state as JSON. A heartbeat that merely repeats
    this one, for the same desired state, is answered from memory afterwards (``corral.head.quiet``)."""
    now = rt.clock.now()
    with rt.write() as session:
        row = authenticate_node(session, node, token)
        if row.state == NodeState.NOT_READY.value and not req.leaving:
            # (A leaving agent is heard out: it reports how the tasks it stops end, over its grace period.)
            rt.quiet.forget(node)
            raise Conflict(f"node {node} was declared lost ({row.reason}); stop its tasks and register again")
        row.last_heartbeat = now
        if req.samples:
            rt.samples.record(node, now, req.samples)
        health.assess(session, row, req, now)
        reported = {r.task_id: r for r in req.tasks}
        applied_before = rt.quiet.handled_reports(node, token)
        fresh = [r for r in req.tasks if report_key(r) not in applied_before]
        tasks, jobs = _rows_reported(session, fresh)
        for report in fresh:
            _apply_report(session, node, report, now, tasks.get(report.task_id), jobs)
        news_pending = False  # a task handed out in a version the agent has not acted on yet
        for task in _live_tasks(session, node):
            if not handed_out(task) or task.id in reported:
                continue
            if task.assigned_version > req.applied_version:
                news_pending = True
            elif task.state == TaskState.STOPPING.value:
                release(session, task, TaskState.EXITED, now, None, "stopped before it started")
            else:
                _lose(session, task, now, f"the agent on {node} does not run it")
        if req.leaving:
            _leave(session, row, now, reported)
        version = session.info.get("bumped_nodes", {}).get(node, row.desired_version)
        token_hash = row.token_hash
    if req.leaving:
        rt.quiet.forget(node)
        return DesiredState(version=version, tasks=[], stop_grace_s={}).model_dump_json().encode()
    if version <= req.applied_version:
        # An agent applies a desired state only when its version is newer than the one it has: the tasks
        # of a version it has applied would be read, sent and parsed for nothing. (A change committed
        # since reaches it through its watch and the next heartbeat.)
        answer = DesiredState(version=version, tasks=[], stop_grace_s={}).model_dump_json().encode()
    else:
        # Read after the write commits, so other writers need not wait while it is built; one read
        # transaction gives a consistent desired state and its version.
        with rt.read() as session:
            row = authenticate_node(session, node, token)
            version = row.desired_version
            answer = desired_json(session, rt, row)
            token_hash = row.token_hash
    rt.quiet.remember(node, token_hash, version, req, answer, applied_matters=news_pending)
    if rt.notifier is not None:
        rt.notifier.nodes_changed([(node, version)])
    return answer


def quiet_heartbeat(rt: HeadRuntime, node: str, token: str, req: HeartbeatRequest) -> bytes | None:
    """The answer to a heartbeat that repeats the last one handled in full, or None."""
    known = rt.notifier.known_version(node) if rt.notifier is not None else None
    answer = rt.quiet.answer(node, token, req, known)
    if answer is not None:
        now = rt.clock.now()
        rt.quiet.heard(node, now)
        if req.samples:
            rt.samples.record(node, now, req.samples)
    return answer


def _check_not_held(rt: HeadRuntime, row: NodeRow, node_token: str, now: datetime) -> None:
    """Refuse to hand a node whose agent is heartbeating to another agent (two agents given one --name):
    only the holder of the node's credential (the same agent, restarted) may register it again, until
    the node falls silent for the node timeout or its agent leaves."""
    if row.state == NodeState.NOT_READY.value or row.last_heartbeat is None or not row.token_hash:
        return
    silent = (now - row.last_heartbeat).total_seconds()
    if silent >= rt.settings.node_timeout_s or (node_token and same_token(node_token, row.token_hash)):
        return
    raise Conflict(
        f"node {row.name} is held by another agent, heard {silent:.0f}s ago: stop that agent, or give this one "
        f"another --name (a node silent for {rt.settings.node_timeout_s:.0f}s may be taken over)"
    )


def write_heard(rt: HeadRuntime) -> int:
    """Write the last-heard times of quiet heartbeats; how many nodes. A node declared lost in the
    meantime stays lost, and a time never moves back."""
    heard = rt.quiet.take_heard()
    if not heard:
        return 0
    table = cast(Table, NodeRow.__table__)
    statement = (
        update(table)
        .where(
            table.c.name == bindparam("b_node"),
            table.c.state != NodeState.NOT_READY.value,
            table.c.last_heartbeat < bindparam("b_when"),
        )
        .values(last_heartbeat=bindparam("b_when"))
    )
    with rt.write() as session:
        session.connection().execute(statement, [{"b_node": n, "b_when": t} for n, t in heard.items()])
    return len(heard)


def _rendezvous_chosen(session: Session, task: TaskRow, port: int) -> None:
    """Rank 0's agent chose the port: hand the other ranks out, with it."""
    for other in session.scalars(
        select(TaskRow).where(TaskRow.job_id == task.job_id, TaskRow.generation == task.generation)
    ):
        other.master_port = port
        if other.node_rank > 0 and other.state == TaskState.ASSIGNED.value:
            other.assigned_version = bump_node(session, other.node)


def _rows_reported(session: Session, reports: list[TaskReport]) -> tuple[dict[str, TaskRow], dict[str, JobRow]]:
    """The task rows the reports name and their jobs' rows, two queries for any number of reports."""
    if not reports:
        return {}, {}
    ids = [r.task_id for r in reports]
    tasks = {t.id: t for t in session.scalars(select(TaskRow).where(TaskRow.id.in_(ids)))}
    job_ids = {t.job_id for t in tasks.values()}
    jobs = {j.id: j for j in session.scalars(select(JobRow).where(JobRow.id.in_(job_ids)))} if job_ids else {}
    return tasks, jobs


def _apply_report(
    session: Session, node: str, report: TaskReport, now: datetime, task: TaskRow | None, jobs: dict[str, JobRow]
) -> None:
    """Apply one task report to its task's row (None: unknown) and its job's (from ``_rows_reported``)."""
    if task is None or task.generation != report.generation:
        return  # a stale attempt; the desired state no longer lists it, so the agent stops it
    if task.node != node:
        return  # another node's task: only the node that runs a task may report on it
    if task.state == TaskState.LOST.value and report.state == "EXITED":
        if task.fenced_after is not None and task.fenced_after > now:
            task.fenced_after = now  # its processes are gone: the next attempt need not wait out the lease
        return
    job = jobs.get(task.job_id)
    if job is None or task.state not in [s.value for s in LIVE_TASK_STATES]:
        return
    if report.master_port and task.node_rank == 0 and task.master_port == 0:
        if job.nodes > 1:
            _rendezvous_chosen(session, task, report.master_port)
        else:
            task.master_port = report.master_port  # no other rank waits for it
    if report.checkpoint_at is not None and job.generation == task.generation:
        record_checkpoint(job, min(datetime.fromtimestamp(report.checkpoint_at, UTC), now))
    if report.state == "STARTING":
        return  # known to the agent; RUNNING follows
    if report.state == "RUNNING":
        task_running(session, task, job, now)
        if report.exit_code:  # one of its processes failed; the agent stops the others
            task_failing(session, task, job, now, report.exit_code, report.detail)
    else:
        task_exited(session, task, job, now, report.exit_code, report.detail, report.interrupted)


def _leave(session: Session, row: NodeRow, now: datetime, reported: Collection[str]) -> None:
    """The node's agent is shutting down: the node takes no work until an agent registers again, and the
    jobs of tasks it will not run (handed out, not started) are queued again, as its stopped ones are."""
    why = agent_left_reason(row)
    if row.state != NodeState.NOT_READY.value:  # the first of a leaving agent's heartbeats
        row.state = NodeState.NOT_READY.value
        row.reason = why
        bump_node(session, row.name)
        record_event(session, now, "node.not_ready", why, node=row.name)
    for task in _live_tasks(session, row.name):
        if task.id in reported:
            continue
        job = session.scalar(select(JobRow).where(JobRow.id == task.job_id))
        if job is not None:
            task_exited(session, task, job, now, None, "its agent shut down before starting it", interrupted=True)
    wake_scheduler(session)


def _lose(session: Session, task: TaskRow, now: datetime, why: str) -> None:
    job = session.scalar(select(JobRow).where(JobRow.id == task.job_id))
    if job is not None:
        task_lost(session, task, job, now, why)


def _live_tasks(session: Session, node: str) -> list[TaskRow]:
    return list(
        session.scalars(
            select(TaskRow).where(TaskRow.node == node, TaskRow.state.in_([s.value for s in LIVE_TASK_STATES]))
        )
    )


def current_version(rt: HeadRuntime, node: str, token: str) -> int:
    with rt.read() as session:
        return authenticate_node(session, node, token).desired_version


def read_desired(rt: HeadRuntime, node: str, token: str) -> bytes:
    """The node's desired state as JSON."""
    with rt.read() as session:
        row = authenticate_node(session, node, token)
        return desired_json(session, rt, row)
