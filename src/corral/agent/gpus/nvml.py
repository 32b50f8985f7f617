"""Real GPUs through NVML (nvidia-ml-py)."""

from __future__ import annotations

import re

import pynvml

from corral.agent.gpus.base import Inventory
from corral.api import GpuInfo

_KNOWN = (
    "GB200",
    "B200",
    "B100",
    "H200",
    "H100",
    "H800",
    "GH200",
    "A100",
    "A800",
    "A40",
    "A30",
    "A10G",
    "A10",
    "L40S",
    "L40",
    "L4",
    "V100",
    "T4",
    "P100",
    "RTX",
)


def short_type(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``H100``; unknown names keep their first model-like word."""
    cleaned = name.replace("NVIDIA", "").replace("Tesla", "").strip()
    for known in _KNOWN:
        if re.search(rf"\b{known}\b", cleaned):
            return known
    words = [w for w in re.split(r"[\s\-]+", cleaned) if w]
    return re.sub(r"[^A-Za-z0-9_.\-]", "", words[0]) if words else "GPU"


class NvmlGpus:
    def discover(self) -> Inventory:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return Inventory(gpus=[], source="none", note=f"NVML could not start ({exc}); no NVIDIA driver here?")
        try:
            count = pynvml.nvmlDeviceGetCount()
            gpus = []
            for index in range(count):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                name = pynvml.nvmlDeviceGetName(handle)
                name = name.decode() if isinstance(name, bytes) else str(name)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                uuid = pynvml.nvmlDeviceGetUUID(handle)
                uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
                gpus.append(
                    GpuInfo(index=index, type=short_type(name), memory_mb=int(memory.total) // (1024 * 1024), uuid=uuid)
                )
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        except pynvml.NVMLError as exc:
            return Inventory(gpus=[], source="none", note=f"NVML failed while listing GPUs: {exc}")
        finally:
            pynvml.nvmlShutdown()
        if not gpus:
            return Inventory(gpus=[], source="none", note="NVML found no GPU", driver=driver)
        return Inventory(gpus=gpus, source="nvml", driver=driver)
