"""What the agent knows of its GPUs, whichever way it found them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from corral.api import GpuInfo

GpuSource = Literal["nvml", "fake", "none"]


@dataclass(frozen=True)
class HostDevice:
    """What the host's own tools call one slot: the physical GPU's NVML index, the MIG device's
    index on it (None for a whole GPU), and the UUID (``GPU-…`` or ``MIG-…``). The NVIDIA Container
    Toolkit names a MIG device ``GPU:MIG`` (``0:1``) by index, or by its UUID."""

    gpu: int
    mig: int | None = None
    uuid: str = ""

    @property
    def index_name(self) -> str:
        """``0`` for a whole GPU, ``0:1`` for MIG device 1 of GPU 0."""
        return str(self.gpu) if self.mig is None else f"{self.gpu}:{self.mig}"


@dataclass(frozen=True)
class Inventory:
    gpus: list[GpuInfo]
    source: GpuSource
    note: str = ""  # why no GPU was found, said once at start
    driver: str = ""
    details: dict[str, str] = field(default_factory=dict)
    # How CUDA_VISIBLE_DEVICES names a slot when not by its index (MIG devices and, beside them, whole
    # GPUs are named by UUID: slot numbers then differ from CUDA's device numbers).
    visible: dict[int, str] = field(default_factory=dict)
    # Slot → the host device behind it (NVML only): what containers are given, by the host's names.
    devices: dict[int, HostDevice] = field(default_factory=dict)


class GpuDiscovery(Protocol):
    def discover(self) -> Inventory: ...
