"""Fragmentation: free GPUs that cannot serve the largest pending request (per GPU type).

After a cycle's placements, for each GPU type: the largest number of whole GPUs one node of a
pending job needs on that type; every free GPU on a node that has fewer free GPUs of that type
than that is fragmented (it can serve smaller jobs, not the largest one waiting).
"""

from __future__ import annotations

from corral.sched.plan import Plan
from corral.sched.policy import Policy
from corral.sched.snapshot import Snapshot


def fragmentation(snapshot: Snapshot, plan: Plan, policy: Policy) -> dict[str, float]:
    """Fragmented free GPUs by type, once the plan's placements are made (0 where nothing waits)."""
    view = snapshot.view(policy.gpu_ranker, policy.cpu_ranker)
    for placement in plan.placements:
        view.apply(placement)
    placed = {p.job_id for p in plan.placements}
    largest: dict[str, int] = {}
    for job in snapshot.pending:
        request = job.request
        if job.id in placed or request.gpus_per_node <= 0 or request.fractional:
            continue
        for gpu_type in request.gpu_types or view.gpu_types:
            largest[gpu_type] = max(largest.get(gpu_type, 0), request.gpu_slots_per_node)
    out = {gpu_type: 0.0 for gpu_type in view.gpu_types}
    for node in view.nodes.values():
        for gpu_type in node.gpu_types:
            free = len(node.empty_gpus(gpu_type))
            if 0 < free < largest.get(gpu_type, 0):
                out[gpu_type] += free
    return out
