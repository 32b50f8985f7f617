"""Nodes as users see them: list and cluster status."""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import func, select

from corral import __version__
from corral.api import GpuCount, GpuOut, NodeOut, StatusOut
from corral.head.runtime import HeadRuntime
from corral.head.samples import Reading
from corral.head.security import Principal
from corral.head.services.common import NotFound, record_event, wake_scheduler
from corral.head.store.tables import GpuClaimRow, JobRow, NodeRow
from corral.model import EPSILON, JobState, NodeState


def list_nodes(rt: HeadRuntime) -> list[NodeOut]:
    with rt.read() as session:
        rows = list(session.scalars(select(NodeRow).order_by(NodeRow.name)))
        claims: dict[tuple[str, int], list[GpuClaimRow]] = defaultdict(list)
        for claim in session.scalars(select(GpuClaimRow)):
            claims[(claim.node, claim.gpu_index)].append(claim)
    latest = rt.samples.latest()
    return [_node_out(row, claims, latest) for row in rows]


def _node_out(
    row: NodeRow, claims: dict[tuple[str, int], list[GpuClaimRow]], latest: dict[tuple[str, int], Reading]
) -> NodeOut:
    gpus = []
    for gpu in row.gpus:
        held = claims.get((row.name, gpu["index"]), [])
        reading = latest.get((row.name, gpu["index"]))
        sample = reading.sample if reading is not None else None
        jobs = sorted({c.job_id for c in held})
        gpus.append(
            GpuOut(
                index=gpu["index"],
                type=gpu["type"],
                memory_mb=gpu["memory_mb"],
                allocated_to=jobs[0] if jobs else None,
                allocated_fraction=min(1.0, sum(c.fraction for c in held)),
                shared_by=jobs if any(c.fraction < 1.0 for c in held) else [],  # every job on a shared GPU
                healthy=str(gpu["index"]) not in row.unhealthy_gpus,
                problem=row.unhealthy_gpus.get(str(gpu["index"]), ""),
                utilization=sample.utilization if sample else None,
                memory_used_mb=sample.memory_used_mb if sample else None,
                temperature_c=sample.temperature_c if sample else None,
                power_w=sample.power_w if sample else None,
            )
        )
    unhealthy = row.state == NodeState.READY.value and bool(row.health_problem)
    return NodeOut(
        name=row.name,
        state=NodeState.NOT_READY.value if unhealthy else row.state,
        labels=dict(row.labels),
        gpus=gpus,
        last_heartbeat=row.last_heartbeat,
        cpus=row.cpus,
        memory_mb=row.memory_mb,
        address=row.address,
        reason=f"unhealthy: {row.health_problem}" if unhealthy else row.reason,
        registered_at=row.registered_at,
        container_runtime=row.container_runtime,
    )


def status(rt: HeadRuntime) -> StatusOut:
    nodes = list_nodes(rt)
    with rt.read() as session:
        rows = session.execute(select(JobRow.state, func.count()).group_by(JobRow.state))
        counts = {state: int(count) for state, count in rows}
    by_type: dict[str, Counter[str]] = defaultdict(Counter)
    for node in nodes:
        for gpu in node.gpus:
            by_type[gpu.type]["total"] += 1
            if node.state == NodeState.READY.value and gpu.healthy and gpu.allocated_fraction < EPSILON:
                by_type[gpu.type]["free"] += 1
    return StatusOut(
        version=__version__,
        head_url=rt.settings.url,
        uptime_s=round(rt.clock.monotonic() - rt.started_monotonic, 3),
        nodes_ready=sum(1 for n in nodes if n.state == NodeState.READY.value),
        nodes_total=len(nodes),
        gpus_free=sum(c["free"] for c in by_type.values()),
        gpus_total=sum(c["total"] for c in by_type.values()),
        gpus_by_type={t: GpuCount(free=c["free"], total=c["total"]) for t, c in sorted(by_type.items())},
        jobs_by_state={s.value: int(counts.get(s.value, 0)) for s in JobState},
    )


def agent_left_reason(row: NodeRow) -> str:
    """Why a node whose agent shut down is NOT_READY, and how it comes back: drained or taking work."""
    if row.drained:
        return f"its agent shut down; the node comes back drained when an agent registers ({row.drain_reason})"
    return "its agent shut down; the node takes work again once an agent registers"


def set_drained(rt: HeadRuntime, who: Principal, name: str, drained: bool, reason: str) -> NodeOut:
    """Drain: the node takes no new work (running jobs go on); undrain: it takes work again."""
    now = rt.clock.now()
    with rt.write() as session:
        row = session.get(NodeRow, name)
        if row is None:
            raise NotFound(f"no node {name!r}")
        again = drained and row.drained and not reason  # draining again without a reason keeps the first one
        before = (row.drained, row.drain_reason)
        left = agent_left_reason(row)
        row.drained = drained
        if not again:
            row.drain_reason = f"drained by {who.user}" + (f": {reason}" if reason else "") if drained else ""
        if row.state != NodeState.NOT_READY.value:
            row.state = NodeState.DRAINED.value if drained else NodeState.READY.value
            row.reason = row.drain_reason
        elif row.reason == left:  # its agent left: say how the node comes back now
            row.reason = agent_left_reason(row)
        if (row.drained, row.drain_reason) != before:  # an event says what changed: not a repeat
            verb = "drained" if drained else "undrained"
            record_event(session, now, f"node.{verb}", row.drain_reason or f"{verb} by {who.user}", node=name)
            wake_scheduler(session)
    return next(n for n in list_nodes(rt) if n.name == name)
