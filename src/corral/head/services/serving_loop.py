"""The serve loop's steps: load the services, decide (autoscaler, rollout), apply under a guard.

Readiness probes run between loading and deciding, outside any transaction. The apply step
re-reads each service and skips it if it changed meanwhile (a new spec, a scale): the next
round decides again on fresh state.

A replica leaving the pool is stopped once the gateways have had ``DRAIN_MIN_S`` to hear of it
and count no request in flight on it, or after ``DRAIN_MAX_S`` whatever it still serves. A
replica whose job ends while it is wanted is replaced after a back-off (``corral.serve.restarts``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from corral.head.runtime import HeadRuntime
from corral.head.security import Principal, Role
from corral.head.services.common import record_event, wake_scheduler
from corral.head.services.jobs import _new_row as new_job_row
from corral.head.services.lifecycle import end_job
from corral.head.services.serving import RESTART_KEY, ReplicaInfo, notify_changed, replica_infos, stored_spec
from corral.head.store.serving_tables import ReplicaRow, ServiceRow
from corral.head.store.tables import EventRow, JobRow
from corral.model import JobState
from corral.serve.autoscale import AutoscalePolicy, AutoscaleState, LoadSample, decide_replicas
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.probe import Prober
from corral.serve.restarts import Backoff, ReplicaExit, next_backoff
from corral.serve.rollout import Phase, ReplicaState, Rollout, plan_rollout
from corral.spec.service import ServiceSpec

DRAIN_MIN_S = 2.0  # a replica out of the pool runs at least this long: every gateway hears it left
DRAIN_MAX_S = 30.0  # and at most this long, however long the requests it still serves take


@dataclass(frozen=True)
class ServiceState:
    name: str
    user: str
    spec: ServiceSpec
    revision: int
    desired: int
    autoscale_state: AutoscaleState
    updated_at: datetime
    replicas: tuple[ReplicaInfo, ...]
    backoff: Backoff = field(default_factory=Backoff)


@dataclass(frozen=True)
class ServiceDecision:
    name: str
    revision: int  # with updated_at: the guard
    updated_at: datetime
    desired: int
    autoscale_state: AutoscaleState
    rollout: Rollout
    readiness: dict[str, bool] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    exits: tuple[ReplicaExit, ...] = ()
    pool_changed: bool = False  # replicas join or leave the gateways' pool


def load(rt: HeadRuntime) -> list[ServiceState]:
    with rt.read() as session:
        rows = list(session.scalars(select(ServiceRow).order_by(ServiceRow.name)))
        infos = replica_infos(session)
    by_service: dict[str, list[ReplicaInfo]] = {}
    for info in infos:
        by_service.setdefault(info.service, []).append(info)
    return [
        ServiceState(
            name=row.name,
            user=row.user,
            spec=stored_spec(row),
            revision=row.revision,
            desired=row.desired,
            autoscale_state=AutoscaleState.from_json(row.autoscale_state),
            updated_at=row.updated_at,
            replicas=tuple(by_service.get(row.name, [])),
            backoff=Backoff.from_json(row.autoscale_state.get(RESTART_KEY, {})),
        )
        for row in rows
    ]


def probe_targets(services: Sequence[ServiceState]) -> tuple[dict[str, str], dict[str, float]]:
    """The readiness URL of every replica that listens and is not leaving; the probe timeouts."""
    urls, timeouts = {}, {}
    for service in services:
        for replica in service.replicas:
            if replica.url is not None and replica.draining_since is None:
                urls[replica.job_id] = replica.url + service.spec.readiness.path
                timeouts[replica.job_id] = service.spec.readiness.timeout_s
    return urls, timeouts


def policy_of(spec: ServiceSpec) -> AutoscalePolicy:
    return AutoscalePolicy(
        min_replicas=spec.replicas.min,
        max_replicas=spec.replicas.max,
        target_inflight=spec.autoscale.target_inflight,
        target_rps=spec.autoscale.target_rps,
        up_delay_s=spec.autoscale.up_delay_s,
        down_delay_s=spec.autoscale.down_delay_s,
    )


def decide(
    service: ServiceState,
    window: Sequence[LoadSample],
    probes: Mapping[str, bool],
    now: datetime,
    inflight: Mapping[str, int] | None = None,
) -> ServiceDecision:
    desired, scale_state = decide_replicas(
        window, service.desired, policy_of(service.spec), service.autoscale_state, now.timestamp()
    )
    readiness = {r.job_id: probes.get(r.job_id, False) for r in service.replicas if r.draining_since is None}
    held = inflight or {}
    states = [_replica_state(r, readiness.get(r.job_id, False), now, held.get(r.job_id, 0)) for r in service.replicas]
    rollout = plan_rollout(desired, service.revision, states, DRAIN_MIN_S, DRAIN_MAX_S)
    exits = tuple(_exit(r) for r in service.replicas if JobState(r.job_state).terminal and r.draining_since is None)
    backoff = next_backoff(service.backoff, exits, any(s.ready for s in states), now.timestamp())
    if rollout.start and backoff.waiting(now.timestamp()):
        rollout = replace(rollout, start=0)
    return ServiceDecision(
        name=service.name,
        revision=service.revision,
        updated_at=service.updated_at,
        desired=desired,
        autoscale_state=scale_state,
        rollout=rollout,
        readiness=readiness,
        backoff=backoff,
        exits=exits,
        pool_changed=bool(rollout.drain) or any(readiness.get(r.job_id, False) != r.ready for r in service.replicas),
    )


def _replica_state(replica: ReplicaInfo, ready: bool, now: datetime, inflight: int) -> ReplicaState:
    if JobState(replica.job_state).terminal:
        phase = Phase.ENDED
    elif replica.draining_since is not None:
        phase = Phase.DRAINING
    else:
        phase = Phase.ACTIVE
    return ReplicaState(
        id=replica.job_id,
        revision=replica.revision,
        phase=phase,
        ready=ready and replica.job_state == JobState.RUNNING.value,
        age_s=(now - replica.created_at).total_seconds(),
        draining_for_s=(now - replica.draining_since).total_seconds() if replica.draining_since else 0.0,
        inflight=inflight,
    )


def _exit(replica: ReplicaInfo) -> ReplicaExit:
    ran = None
    if replica.started_at is not None and replica.finished_at is not None:
        ran = max(0.0, (replica.finished_at - replica.started_at).total_seconds())
    return ReplicaExit(replica=replica.job_id, state=replica.job_state, exit_code=replica.exit_code, ran_s=ran)


def apply(rt: HeadRuntime, services: Sequence[ServiceState], decisions: Sequence[ServiceDecision]) -> None:
    if not decisions:
        return
    by_name = {s.name: s for s in services}
    now = rt.clock.now()
    pool_changed = False
    with rt.write() as session:
        for decision in decisions:
            _set_readiness(session, decision.readiness)
            row = session.get(ServiceRow, decision.name)
            if row is None or row.revision != decision.revision or row.updated_at != decision.updated_at:
                continue  # changed since it was loaded: decide again next round
            if row.desired != decision.desired:
                record_event(
                    session,
                    now,
                    "service.autoscaled",
                    f"service {row.name}: {row.desired} → {decision.desired} replicas",
                    owner=row.user,
                )
                row.desired = decision.desired
            row.autoscale_state = _state_json(decision)
            _record_exits(session, row.name, decision, now)
            _apply_rollout(session, by_name[decision.name], decision.rollout, now)
            pool_changed = pool_changed or decision.pool_changed or bool(decision.rollout.stop)
    if pool_changed:
        notify_changed(rt)


def _state_json(decision: ServiceDecision) -> dict[str, Any]:
    state = decision.autoscale_state.to_json()
    if decision.backoff.failures:
        state[RESTART_KEY] = decision.backoff.to_json()
    return state


def _record_exits(session: Session, service: str, decision: ServiceDecision, now: datetime) -> None:
    if not decision.exits:
        return
    wait = max(0.0, decision.backoff.not_before - now.timestamp())
    for gone in decision.exits:
        message = f"service {service}: {gone.describe()}; replacing it in {wait:.0f} s"
        record_event(session, now, "service.replica_exited", message, job_id=gone.replica)


def _set_readiness(session: Session, readiness: Mapping[str, bool]) -> None:
    for value in (True, False):
        ids = [job_id for job_id, ready in readiness.items() if ready is value]
        if ids:
            session.execute(
                update(ReplicaRow)
                .where(ReplicaRow.job_id.in_(ids), ReplicaRow.draining_since.is_(None))
                .values(ready=value)
            )


def _apply_rollout(session: Session, service: ServiceState, rollout: Rollout, now: datetime) -> None:
    if rollout.empty:
        return
    if rollout.forget:
        session.execute(delete(ReplicaRow).where(ReplicaRow.job_id.in_(list(rollout.forget))))
    if rollout.drain:
        session.execute(
            update(ReplicaRow)
            .where(ReplicaRow.job_id.in_(list(rollout.drain)), ReplicaRow.draining_since.is_(None))
            .values(draining_since=now, ready=False)
        )
    for job_id in rollout.stop:
        job = session.scalar(select(JobRow).where(JobRow.id == job_id))
        if job is not None and not JobState(job.state).terminal:
            end_job(session, job, JobState.CANCELLED, now, f"replica of service {service.name} drained and stopped")
    owner = Principal(user=service.user, role=Role.USER)
    job_spec = service.spec.replica_job(service.revision)
    for _ in range(rollout.start):
        job = new_job_row(job_spec, owner, now, None)
        job.reason = f"replica of service {service.name} (revision {service.revision}), waiting for the scheduler"
        session.add(job)
        session.flush()
        session.add(
            ReplicaRow(job_id=job.id, service=service.name, revision=service.revision, ready=False, created_at=now)
        )
        session.add(
            EventRow(
                ts=now,
                kind="job.submitted",
                job_id=job.id,
                node=None,
                message=f"replica of service {service.name}",
                data={},
            )
        )
    if rollout.start:
        wake_scheduler(session)


def reconcile(
    rt: HeadRuntime,
    services: Sequence[ServiceState],
    windows: Mapping[str, Sequence[LoadSample]],
    probes: Mapping[str, bool],
    inflight: Mapping[str, int] | None = None,
) -> None:
    """Decide for every service and apply the decisions; ``inflight``: requests per replica."""
    now = rt.clock.now()
    apply(rt, services, [decide(s, windows.get(s.name, ()), probes, now, inflight) for s in services])


async def run_round(rt: HeadRuntime, book: LoadBook, prober: Prober) -> None:
    """One round of the serve loop: load, probe readiness, decide, apply."""
    services = await asyncio.to_thread(load, rt)
    windows = book.windows(rt.clock.monotonic())
    if not services:
        return
    urls, timeouts = probe_targets(services)
    probes = await prober.probe_all(urls, timeouts)
    inflight = book.replica_inflight(rt.clock.monotonic())
    await asyncio.to_thread(reconcile, rt, services, windows, probes, inflight)
