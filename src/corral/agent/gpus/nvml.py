"""Real GPUs through NVML (nvidia-ml-py)."""

from __future__ import annotations

import re

import pynvml

from corral.agent.gpus.base import HostDevice, Inventory
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


MIB = 1024 * 1024


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def mig_profile(name: str, memory_mb: int) -> str:
    """``NVIDIA H100 80GB HBM3 MIG 1g.10gb`` → ``1g.10gb`` (from the memory when the name lacks it)."""
    found = re.search(r"\b(\d+g\.\d+gb)\b", name, re.IGNORECASE)
    return found.group(1).lower() if found else f"mig.{round(memory_mb / 1024)}gb"


def _mig_devices(handle: object) -> list[tuple[int, str, int, str]]:
    """The MIG devices of a GPU in MIG mode: (MIG index, name, memory in MiB, UUID) each; none otherwise.

    The MIG index is NVML's handle index on the GPU, the one the NVIDIA Container Toolkit's
    index names use (``GPU:MIG``)."""
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:  # not a MIG-capable GPU
        return []
    if current != pynvml.NVML_DEVICE_MIG_ENABLE:
        return []
    found = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError:  # no instance in this slot
            continue
        memory = int(pynvml.nvmlDeviceGetMemoryInfo(mig).total) // MIB
        found.append((slot, _text(pynvml.nvmlDeviceGetName(mig)), memory, _text(pynvml.nvmlDeviceGetUUID(mig))))
    return found


class NvmlGpus:
    """Every GPU NVML lists is a slot; a GPU in MIG mode gives one slot per MIG device instead,
    typed ``TYPE-PROFILE`` (``H100-1g.10gb``) so that jobs ask for it by ``gpu_type``."""

    def discover(self) -> Inventory:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return Inventory(gpus=[], source="none", note=f"NVML could not start ({exc}); no NVIDIA driver here?")
        try:
            gpus: list[GpuInfo] = []
            devices: dict[int, HostDevice] = {}
            mig_seen = False
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                kind = short_type(_text(pynvml.nvmlDeviceGetName(handle)))
                migs = _mig_devices(handle)
                mig_seen = mig_seen or bool(migs)
                for mig_index, name, memory, uuid in migs:
                    profile = mig_profile(name, memory)
                    devices[len(gpus)] = HostDevice(gpu=index, mig=mig_index, uuid=uuid)
                    gpus.append(GpuInfo(index=len(gpus), type=f"{kind}-{profile}", memory_mb=memory, uuid=uuid))
                if not migs:
                    memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // MIB
                    uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
                    devices[len(gpus)] = HostDevice(gpu=index, uuid=uuid)
                    gpus.append(GpuInfo(index=len(gpus), type=kind, memory_mb=memory, uuid=uuid))
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError as exc:
            return Inventory(gpus=[], source="none", note=f"NVML failed while listing GPUs: {exc}")
        finally:
            pynvml.nvmlShutdown()
        if not gpus:
            return Inventory(gpus=[], source="none", note="NVML found no GPU", driver=driver)
        visible = {g.index: g.uuid for g in gpus if g.uuid} if mig_seen else {}
        return Inventory(gpus=gpus, source="nvml", driver=driver, visible=visible, devices=devices)
