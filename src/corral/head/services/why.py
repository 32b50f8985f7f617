"""``GET /v1/jobs/{id}/why``: every node's verdict for one job, from the scheduler's own checks."""

from __future__ import annotations

from corral.api import NodeGroupOut, WhyOut
from corral.head.jobcache import load_jobs
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.jobs import get_row, to_out
from corral.head.services.scheduling import load_snapshot
from corral.sched import get_policy, why


def explain_job(rt: HeadRuntime, who: Principal, job_id: str) -> WhyOut:
    with rt.read() as session:
        row = get_row(session, job_id, who)
        out = to_out(session, row, rt)
        [(job, _)] = load_jobs(session, [row.id])
    policy = get_policy(rt.settings.policy)
    snapshot, _ = load_snapshot(rt, policy)
    groups = why(job, snapshot, policy)
    return WhyOut(
        job_id=out.id,
        state=out.state,
        reason=out.reason,
        nodes_needed=job.request.nodes,
        groups=[NodeGroupOut(filter=g.filter, message=g.message, nodes=list(g.nodes)) for g in groups],
    )
