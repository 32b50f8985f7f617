"""One scheduling cycle: ``schedule(snapshot, policy, now) -> Plan``."""

from __future__ import annotations

from datetime import datetime

from corral.model import Job, Request
from corral.sched.placement import find_placement
from corral.sched.plan import Placement, Plan
from corral.sched.policy import Policy
from corral.sched.reasons import explain
from corral.sched.snapshot import CapacityView, Snapshot


def schedule(snapshot: Snapshot, policy: Policy, now: datetime) -> Plan:
    """Place pending jobs greedily, in the policy's order, on what is free now.

    A job that does not fit gets a reason and later jobs may still be placed (no
    reservations yet). ``now`` is part of the input for policies that weigh time; the
    v1 policies do not read it. The same inputs always give the same plan.
    """
    view = CapacityView(snapshot, policy.gpu_ranker, policy.cpu_ranker)
    queue = sorted(snapshot.pending, key=lambda job: (policy.job_order(job), job.id))
    placements: list[Placement] = []
    waiting: list[Job] = []
    # Capacity only shrinks during a cycle, so a request that did not fit never fits later in it.
    unfit: set[Request] = set()
    for job in queue:
        placement = None if job.request in unfit else find_placement(view, job)
        if placement is None:
            unfit.add(job.request)
            waiting.append(job)
        else:
            view.apply(placement)
            placements.append(placement)
    return Plan(placements=tuple(placements), reasons=explain(waiting, view, snapshot))
