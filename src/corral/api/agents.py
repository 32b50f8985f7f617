"""Wire schemas between agents and the head: registration, heartbeats, desired tasks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from corral.spec.quantities import check_label

AGENT_PROTOCOL_VERSION = 1


class GpuInfo(BaseModel):
    index: int = Field(ge=0)
    type: str = Field(min_length=1)
    memory_mb: int = Field(ge=0)
    uuid: str = ""


class TaskReport(BaseModel):
    """What an agent knows of one task it runs or ran."""

    task_id: str
    generation: int
    state: Literal["STARTING", "RUNNING", "EXITED"]
    exit_code: int | None = None
    detail: str = ""
    master_port: int = Field(default=0, ge=0, le=65535, description="rank 0 only: the rendezvous port it chose")
    checkpoint_at: float | None = Field(
        default=None, description="mtime (Unix s) of CORRAL_CHECKPOINT_DIR/.corral-checkpoint, if the job wrote it"
    )
    interrupted: bool = Field(
        default=False, description="stopped by the agent's own shutdown, not by the job or the head"
    )


class RegisterRequest(BaseModel):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    gpus: list[GpuInfo] = Field(default_factory=list)
    cpus: float = Field(ge=0)
    memory_mb: int = Field(ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    advertise_addr: str = ""
    gpu_source: Literal["nvml", "fake", "none"] = "none"
    container_runtime: str = Field(
        default="",
        max_length=32,
        pattern=r"^[a-z0-9-]*$",
        description="the container runtime jobs with an image run through (docker, podman, …); empty: none",
    )
    version: str = ""
    protocol: int = AGENT_PROTOCOL_VERSION
    running: list[TaskReport] = Field(default_factory=list)
    node_token: str = Field(
        default="",
        max_length=200,
        description="the node credential this agent got when it last registered, if it kept one: while the "
        "node's agent is heartbeating, only the holder of its credential may register it again",
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            check_label(key, value)  # as `corral agent --labels` checks them
        return labels


class HostSlots(BaseModel):
    """One node of a job as MPI and DeepSpeed hostfiles list it."""

    addr: str
    slots: int


class DesiredTask(BaseModel):
    """One task the head wants the agent to run, with everything needed to start it."""

    task_id: str
    job_id: str
    generation: int
    node_rank: int
    command: str | list[str]
    launcher: Literal["per-gpu", "per-node"]
    gpus: list[int]
    gpu_fraction: float = 1.0
    env: dict[str, str]
    rank_offset: int
    processes: int
    workdir: str | None = None
    image: str | None = Field(default=None, description="run each rank in this container image")
    volumes: list[str] = Field(default_factory=list, description="HOST:CONTAINER[:ro|rw] mounts into the container")
    checkpoint_dir: str
    grace_s: float
    hosts: list[HostSlots] = Field(default_factory=list, description="every node of the job, by node rank")


class DesiredState(BaseModel):
    """The tasks a node should run; `version` grows whenever that set changes."""

    version: int
    tasks: list[DesiredTask]
    stop_grace_s: dict[str, float] = Field(
        default_factory=dict,
        description="tasks being stopped with a grace period other than the one they started with (task id → s)",
    )


class RegisterResponse(BaseModel):
    node: str
    node_token: str
    heartbeat_interval_s: float
    lease_s: float
    desired: DesiredState


class GpuSample(BaseModel):
    """One reading of one GPU (NVML, or plausible values for fake GPUs)."""

    index: int
    utilization: float = Field(ge=0, le=100, description="percent of time a kernel ran")
    memory_used_mb: int = Field(ge=0)
    temperature_c: float
    power_w: float = Field(ge=0)
    ecc_uncorrectable: int = Field(default=0, ge=0, description="volatile uncorrectable ECC errors")
    xid_errors: int = Field(default=0, ge=0, description="XID errors seen since the agent started")


class HeartbeatRequest(BaseModel):
    """Every task the agent has (running, or exited and not yet acknowledged)."""

    tasks: list[TaskReport] = Field(default_factory=list)
    applied_version: int = Field(default=-1, description="the newest desired-state version the agent has acted on")
    samples: list[GpuSample] = Field(default_factory=list, description="the latest reading of every GPU")
    health_problem: str = Field(default="", description="why the node's health command failed; empty if it passed")
    leaving: bool = Field(
        default=False,
        description="the agent is shutting down: its node takes no new work until an agent registers again",
    )
