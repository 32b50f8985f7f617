"""Frozen domain values shared by the head, the scheduler and the simulator."""

from corral.model.resources import (
    EPSILON,
    FULL_GPU,
    Allocation,
    Gpu,
    Job,
    LiveAllocation,
    Node,
    Request,
    RunningJob,
    interned,
)
from corral.model.states import (
    JOB_TRANSITIONS,
    TERMINAL_JOB_STATES,
    IllegalTransition,
    JobState,
    NodeState,
    TaskState,
    check_job_transition,
    describe_exit,
)
from corral.model.teams import FairShare, Quotas, TeamQuota

__all__ = [
    "EPSILON",
    "FULL_GPU",
    "JOB_TRANSITIONS",
    "TERMINAL_JOB_STATES",
    "Allocation",
    "FairShare",
    "Gpu",
    "IllegalTransition",
    "Job",
    "JobState",
    "LiveAllocation",
    "Node",
    "NodeState",
    "Quotas",
    "Request",
    "RunningJob",
    "TaskState",
    "TeamQuota",
    "check_job_transition",
    "describe_exit",
    "interned",
]
