"""Wire schemas shared by the head, the client, the agent and the CLI."""

from corral.api.agents import (
    AGENT_PROTOCOL_VERSION,
    DesiredState,
    DesiredTask,
    GpuInfo,
    GpuSample,
    HeartbeatRequest,
    HostSlots,
    RegisterRequest,
    RegisterResponse,
    TaskReport,
)
from corral.api.jobs import AllocationOut, CheckpointDone, JobIds, JobOut, SubmitBatch, SubmitBatchOut, TaskOut
from corral.api.nodes import DrainRequest, EventOut, GpuCount, GpuOut, JoinTokenOut, NodeOut, StatusOut

__all__ = [
    "AGENT_PROTOCOL_VERSION",
    "AllocationOut",
    "CheckpointDone",
    "DesiredState",
    "DesiredTask",
    "DrainRequest",
    "EventOut",
    "GpuCount",
    "GpuInfo",
    "GpuOut",
    "GpuSample",
    "HeartbeatRequest",
    "HostSlots",
    "JobIds",
    "JobOut",
    "JoinTokenOut",
    "NodeOut",
    "RegisterRequest",
    "RegisterResponse",
    "StatusOut",
    "SubmitBatch",
    "SubmitBatchOut",
    "TaskOut",
    "TaskReport",
]
