"""The pure scheduler: ``schedule(snapshot, policy, now) -> Plan``. No I/O, no clock, no randomness."""

from corral.sched.cycle import schedule
from corral.sched.feasibility import never_fits
from corral.sched.plan import NEVER_FITS, NO_NODES, RESOURCES, Placement, Plan, Reason
from corral.sched.policy import POLICIES, Policy, get_policy
from corral.sched.snapshot import CapacityView, NodeCapacity, NodeRanker, Rank, Snapshot

__all__ = [
    "NEVER_FITS",
    "NO_NODES",
    "POLICIES",
    "RESOURCES",
    "CapacityView",
    "NodeCapacity",
    "NodeRanker",
    "Placement",
    "Plan",
    "Policy",
    "Rank",
    "Reason",
    "Snapshot",
    "get_policy",
    "never_fits",
    "schedule",
]
