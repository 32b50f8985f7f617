"""Services: create or update (a rolling update when the replica template changes), list, show,
scale, delete, and the gateway's view of ready replicas.

A replica is an ordinary job (scheduled, run, requeued, preempted like any other); the
``service_replicas`` table says which service and revision it belongs to. The serve loop
(``serving_loop``) keeps each service's replicas at its desired count.

Whatever changes which replicas a gateway may route to (a service created, updated, scaled or
deleted; replicas joining or leaving the pool) calls the head's watchers (``watch``) once it has
committed, so the gateway in the head's own process routes by the new state from the next
request on, without waiting for its next refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from corral.api.services import (
    Endpoint,
    GatewayView,
    ReplicaOut,
    ServiceEndpoints,
    ServiceOut,
)
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.common import Conflict, Infeasible, NotFound, check_workdir, record_event
from corral.head.services.convert import request_of
from corral.head.services.jobs import runtime_up
from corral.head.services.lifecycle import end_job
from corral.head.store.serving_tables import ReplicaRow, ServiceRow
from corral.head.store.tables import JobRow, NodeRow, TaskRow
from corral.model import JobState
from corral.sched import NO_CONTAINER_RUNTIME, never_fits
from corral.sched.describe import plural
from corral.serve.restarts import Backoff
from corral.spec.resources import STORED
from corral.spec.service import ServiceSpec

# What changes the replicas themselves; anything else (replica bounds, autoscaling, readiness)
# applies to the running replicas as they are.
TEMPLATE_FIELDS = ("command", "resources", "team", "priority", "env", "workdir", "image", "volumes")
# Where the replacement back-off lives in a service's stored policy state (``autoscale_state``).
RESTART_KEY = "restart"


def watch(rt: HeadRuntime, callback: Callable[[], None]) -> None:
    """Call ``callback`` after every committed change to what gateways route by, from the thread
    that made it (``ReplicaPool.invalidate`` is such a callback). The runtime keeps the callbacks:
    they go with it (a callback usually refers back to the runtime, so a table outside it would keep
    every runtime alive)."""
    rt.service_watchers.append(callback)


def notify_changed(rt: HeadRuntime) -> None:
    for callback in rt.service_watchers:
        callback()


def spec_json(spec: ServiceSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True)


def stored_spec(row: ServiceRow) -> ServiceSpec:
    return ServiceSpec.model_validate(row.spec, context={STORED: True})


def apply(rt: HeadRuntime, who: Principal, spec: ServiceSpec) -> tuple[ServiceOut, bool]:
    """Create the service, or update it; answers whether it was created."""
    _check_replica_job(spec)
    check_workdir(spec.workdir)
    now = rt.clock.now()
    with rt.write() as session:
        _check_feasible(rt, session, spec)
        row = session.get(ServiceRow, spec.name)
        created = row is None
        if row is None:
            row = ServiceRow(
                name=spec.name,
                user=who.user,
                spec=spec_json(spec),
                revision=1,
                desired=spec.replicas.min,
                autoscale_state={},
                created_at=now,
                updated_at=now,
            )
            session.add(row)
            record_event(session, now, "service.created", f"service {spec.name} created by {who.user}", owner=row.user)
        else:
            if not who.is_admin and row.user != who.user:  # names are cluster-wide
                raise Conflict(f"name: service {spec.name!r} belongs to another user; choose another name")
            old = stored_spec(row)
            if any(getattr(old, f) != getattr(spec, f) for f in TEMPLATE_FIELDS):
                row.revision += 1
                # A new command deserves a fresh start: no back-off left from the old one's exits.
                row.autoscale_state = {k: v for k, v in row.autoscale_state.items() if k != RESTART_KEY}
                record_event(
                    session,
                    now,
                    "service.updated",
                    f"service {spec.name}: rolling out revision {row.revision}",
                    owner=row.user,
                )
            row.spec = spec_json(spec)
            row.desired = max(spec.replicas.min, min(spec.replicas.max, row.desired))
            row.updated_at = now
        session.flush()
        out = to_out(session, rt, row), created
    notify_changed(rt)
    return out


def _check_replica_job(spec: ServiceSpec) -> None:
    try:
        spec.replica_job(1)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"])
        raise Infeasible(field, str(err["msg"]).removeprefix("Value error, ")) from None


def _check_feasible(rt: HeadRuntime, session: Session, spec: ServiceSpec) -> None:
    nodes = rt.node_models.load(session)
    if not nodes:
        return
    problem = never_fits(request_of(spec.replica_job(1)), nodes)
    if problem == NO_CONTAINER_RUNTIME or (spec.image is not None and not runtime_up(nodes)):
        raise Infeasible("image", NO_CONTAINER_RUNTIME)  # as for a job: a node that is up must have one
    if problem is not None:
        raise Infeasible("resources", f"a replica can never run on this cluster: {problem}")


def _owned(row: ServiceRow, who: Principal) -> None:
    if not who.is_admin and row.user != who.user:
        raise NotFound(f"no service {row.name!r}")  # another user's service is not revealed


def get_row(session: Session, name: str, who: Principal) -> ServiceRow:
    row = session.get(ServiceRow, name)
    if row is None:
        raise NotFound(f"no service {name!r}; `corral services` lists them")
    _owned(row, who)
    return row


def list_services(rt: HeadRuntime, who: Principal) -> list[ServiceOut]:
    with rt.read() as session:
        query = select(ServiceRow).order_by(ServiceRow.name)
        if not who.is_admin:
            query = query.where(ServiceRow.user == who.user)
        return [to_out(session, rt, row) for row in session.scalars(query)]


def show(rt: HeadRuntime, who: Principal, name: str) -> ServiceOut:
    with rt.read() as session:
        return to_out(session, rt, get_row(session, name, who))


def scale(rt: HeadRuntime, who: Principal, name: str, replicas: int) -> ServiceOut:
    """Pin the replica count: min = max = ``replicas`` until the service file is applied again."""
    now = rt.clock.now()
    with rt.write() as session:
        row = get_row(session, name, who)
        spec = stored_spec(row)
        pinned = spec.model_copy(
            update={"replicas": spec.replicas.model_copy(update={"min": replicas, "max": replicas})}
        )
        row.spec = spec_json(pinned)
        row.desired = replicas
        row.autoscale_state = {k: v for k, v in row.autoscale_state.items() if k == RESTART_KEY}
        row.updated_at = now
        scaled = f"service {name} scaled to {replicas} by {who.user}"
        record_event(session, now, "service.scaled", scaled, owner=row.user)
        session.flush()
        out = to_out(session, rt, row)
    notify_changed(rt)
    return out


def remove(rt: HeadRuntime, who: Principal, name: str) -> None:
    """Delete the service and stop every replica (SIGTERM, grace period, SIGKILL)."""
    now = rt.clock.now()
    with rt.write() as session:
        row = get_row(session, name, who)
        for replica in session.scalars(select(ReplicaRow).where(ReplicaRow.service == name)):
            job = session.scalar(select(JobRow).where(JobRow.id == replica.job_id))
            if job is not None and not JobState(job.state).terminal:
                end_job(session, job, JobState.CANCELLED, now, f"service {name} deleted by {who.user}")
        session.execute(delete(ReplicaRow).where(ReplicaRow.service == name))
        session.delete(row)
        record_event(session, now, "service.deleted", f"service {name} deleted by {who.user}", owner=row.user)
    notify_changed(rt)


@dataclass(frozen=True)
class ReplicaInfo:
    """One replica as the serve loop and the views need it."""

    job_id: str
    service: str
    revision: int
    job_state: str
    ready: bool
    draining_since: datetime | None
    created_at: datetime
    node: str | None
    url: str | None
    exit_code: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reason: str = ""  # the replica job's: why it waits, or how it ended


def replica_infos(session: Session, service: str | None = None) -> list[ReplicaInfo]:
    """Every replica (of one service, or of all), with the address its current attempt listens on."""
    query = select(
        ReplicaRow,
        JobRow.state,
        JobRow.generation,
        JobRow.exit_code,
        JobRow.started_at,
        JobRow.finished_at,
        JobRow.reason,
    ).join(JobRow, JobRow.id == ReplicaRow.job_id)
    if service is not None:
        query = query.where(ReplicaRow.service == service)
    rows = session.execute(query.order_by(ReplicaRow.created_at, ReplicaRow.job_id)).all()
    ids = [r[0].job_id for r in rows]
    addresses: dict[tuple[str, int], tuple[str, str | None]] = {}
    if ids:
        tasks = session.execute(
            select(TaskRow.job_id, TaskRow.generation, TaskRow.node, TaskRow.master_port, NodeRow.address)
            .join(NodeRow, NodeRow.name == TaskRow.node)
            .where(TaskRow.job_id.in_(ids), TaskRow.node_rank == 0)
        ).all()
        for t in tasks:
            url = f"http://{_host(t.address or t.node)}:{t.master_port}" if t.master_port else None
            addresses[(t.job_id, t.generation)] = (t.node, url)
    infos = []
    for replica, state, generation, exit_code, started_at, finished_at, reason in rows:
        node, url = addresses.get((replica.job_id, generation), (None, None))
        running = state == JobState.RUNNING.value
        infos.append(
            ReplicaInfo(
                job_id=replica.job_id,
                service=replica.service,
                revision=replica.revision,
                job_state=state,
                ready=replica.ready and running and url is not None,
                draining_since=replica.draining_since,
                created_at=replica.created_at,
                node=node,
                url=url if running else None,
                exit_code=exit_code,
                started_at=started_at,
                finished_at=finished_at,
                reason=reason or "",
            )
        )
    return infos


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def to_out(
    session: Session, rt: HeadRuntime, row: ServiceRow, replicas: Sequence[ReplicaInfo] | None = None
) -> ServiceOut:
    infos = replica_infos(session, row.name) if replicas is None else replicas
    ready = sum(1 for r in infos if r.ready and r.draining_since is None)
    spec = row.spec
    return ServiceOut(
        name=row.name,
        user=row.user,
        revision=row.revision,
        url=f"{rt.settings.url}/s/{row.name}/",
        replicas_ready=ready,
        replicas_desired=row.desired,
        replicas_min=int(spec["replicas"]["min"]),
        replicas_max=int(spec["replicas"]["max"]),
        created_at=row.created_at,
        updated_at=row.updated_at,
        spec=spec,
        replicas=[
            ReplicaOut(
                job_id=r.job_id,
                revision=r.revision,
                state=r.job_state,
                ready=r.ready,
                draining=r.draining_since is not None,
                node=r.node,
                url=r.url,
            )
            for r in infos
        ],
        reason=Backoff.from_json(row.autoscale_state.get(RESTART_KEY, {})).reason(rt.clock.now().timestamp())
        or _waiting_reason(infos, ready, row.desired)
        or _not_ready_reason(infos, ready, row, rt.clock.now()),
    )


def _waiting_reason(replicas: Sequence[ReplicaInfo], ready: int, desired: int) -> str | None:
    """Why fewer replicas are ready than desired, when some wait to be placed: the first one's reason."""
    waiting = [
        r for r in replicas if r.job_state == JobState.PENDING.value and r.node is None and r.draining_since is None
    ]
    if ready >= desired or not waiting:
        return None
    count = plural(len(waiting), "replica")
    return f"{count} not placed yet: {waiting[0].reason}" if waiting[0].reason else f"{count} not placed yet"


def _not_ready_reason(replicas: Sequence[ReplicaInfo], ready: int, row: ServiceRow, now: datetime) -> str | None:
    """Why fewer replicas are ready than desired, or a rolling update does not go on, when replicas run
    but fail their readiness probe."""
    live = [r for r in replicas if r.job_state == JobState.RUNNING.value and r.draining_since is None]
    running = [r for r in live if not r.ready and r.url is not None]
    rolling = any(r.revision != row.revision for r in live)  # the update waits for a new replica
    if not running or (ready >= row.desired and not rolling):
        return None
    path = str(row.spec.get("readiness", {}).get("path", "/"))
    first = min(running, key=lambda r: r.revision != row.revision)  # the new revision's first
    count = plural(len(running), "replica")
    age = f"running for {max(0.0, (now - first.started_at).total_seconds()):.0f} s; " if first.started_at else ""
    waits = (
        f"; the update to revision {row.revision} waits for it" if rolling and first.revision == row.revision else ""
    )
    return (
        f"{count} running but not ready: {first.job_id} does not pass its readiness probe, GET {path} "
        f"({age}see readiness.path, and corral logs {first.job_id}){waits}"
    )


def gateway_view(rt: HeadRuntime) -> GatewayView:
    """Every service's ready replicas: what a gateway routes to."""
    with rt.read() as session:
        services = list(session.scalars(select(ServiceRow)))
        by_service: dict[str, list[ReplicaInfo]] = {}
        for info in replica_infos(session):
            by_service.setdefault(info.service, []).append(info)
    out = []
    for row in services:
        ready = [
            Endpoint(replica=r.job_id, url=r.url)
            for r in by_service.get(row.name, [])
            if r.ready and r.draining_since is None and r.url is not None
        ]
        hold_s = float(row.spec.get("readiness", {}).get("hold", 60.0))
        out.append(
            ServiceEndpoints(service=row.name, ready=ready, hold_s=hold_s, stopped=row.spec["replicas"]["max"] == 0)
        )
    return GatewayView(services=out)
