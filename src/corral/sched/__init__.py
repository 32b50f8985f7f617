"""The pure scheduler: ``schedule(snapshot, policy, now) -> Plan``. No I/O, no clock, no randomness."""

from corral.sched.cycle import schedule
from corral.sched.feasibility import NO_CONTAINER_RUNTIME, ClusterShapes, never_fits, no_domain_holds
from corral.sched.fragmentation import fragmentation
from corral.sched.node_capacity import NodeCapacity, NodeRanker, Rank
from corral.sched.plan import (
    BACKFILL_BLOCKED,
    DEPENDENCY,
    FASTER_GPU,
    IN_ORDER,
    NEVER_FITS,
    NO_NODES,
    PREEMPTING,
    QUOTA,
    RESERVED,
    RESOURCES,
    Placement,
    Plan,
    Preemption,
    Reason,
    Reservation,
)
from corral.sched.policy import POLICIES, Policy, get_policy
from corral.sched.snapshot import CapacityView, Snapshot
from corral.sched.why import NodeGroup, why

__all__ = [
    "BACKFILL_BLOCKED",
    "DEPENDENCY",
    "FASTER_GPU",
    "IN_ORDER",
    "NEVER_FITS",
    "NO_CONTAINER_RUNTIME",
    "NO_NODES",
    "POLICIES",
    "PREEMPTING",
    "QUOTA",
    "RESERVED",
    "RESOURCES",
    "CapacityView",
    "ClusterShapes",
    "NodeCapacity",
    "NodeGroup",
    "NodeRanker",
    "Placement",
    "Plan",
    "Policy",
    "Preemption",
    "Rank",
    "Reason",
    "Reservation",
    "Snapshot",
    "fragmentation",
    "get_policy",
    "never_fits",
    "no_domain_holds",
    "schedule",
    "why",
]
