"""A fake GPU inventory from a SPEC such as ``4xA100:40GB,2xL4:24GB``, for machines without GPUs."""

from __future__ import annotations

from corral.agent.gpus.base import Inventory
from corral.api import GpuInfo
from corral.spec import parse_gpu_groups


class FakeGpus:
    def __init__(self, spec: str, node: str = "") -> None:
        self.groups = parse_gpu_groups(spec)
        self.node = node

    def discover(self) -> Inventory:
        gpus: list[GpuInfo] = []
        for group in self.groups:
            for _ in range(group.count):
                index = len(gpus)
                gpus.append(
                    GpuInfo(
                        index=index,
                        type=group.gpu_type,
                        memory_mb=group.memory_mb,
                        uuid=f"GPU-fake-{self.node}-{index}",
                    )
                )
        return Inventory(gpus=gpus, source="fake")
