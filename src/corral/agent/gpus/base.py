"""What the agent knows of its GPUs, whichever way it found them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from corral.api import GpuInfo

GpuSource = Literal["nvml", "fake", "none"]


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


class GpuDiscovery(Protocol):
    def discover(self) -> Inventory: ...
