"""GPU readings: NVML on real GPUs; plausible values for fake ones that follow what runs on them."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Protocol

import pynvml

from corral.api import GpuInfo, GpuSample

# Board power at full load, by type; idle draw is taken as a tenth of it.
_MAX_POWER_W = {
    "B200": 1000.0,
    "H200": 700.0,
    "H100": 700.0,
    "A100": 400.0,
    "L40S": 350.0,
    "L4": 72.0,
    "V100": 300.0,
    "T4": 70.0,
}
_DEFAULT_POWER_W = 300.0


class GpuSampler(Protocol):
    def sample(self, busy: Mapping[int, float]) -> list[GpuSample]:
        """One reading per GPU; ``busy`` maps a GPU index to the share of it that tasks hold."""
        ...


class FakeSampler:
    """Readings for fake GPUs: idle GPUs are cool and quiet, GPUs with a task are busy and warm."""

    def __init__(self, gpus: list[GpuInfo], seed: int = 0) -> None:
        self.gpus = gpus
        self._random = random.Random(seed)
        self._temperature = {g.index: 30.0 for g in gpus}

    def sample(self, busy: Mapping[int, float]) -> list[GpuSample]:
        return [self._one(gpu, min(1.0, busy.get(gpu.index, 0.0))) for gpu in self.gpus]

    def _one(self, gpu: GpuInfo, share: float) -> GpuSample:
        utilization = 0.0 if share <= 0 else min(100.0, share * self._random.uniform(75.0, 100.0))
        memory = 0 if share <= 0 else int(gpu.memory_mb * share * self._random.uniform(0.5, 0.8))
        target = 30.0 + 0.45 * utilization
        # Temperature moves toward its target rather than jumping, as a heat sink does.
        self._temperature[gpu.index] += (target - self._temperature[gpu.index]) * 0.5
        peak = _MAX_POWER_W.get(gpu.type, _DEFAULT_POWER_W)
        power = peak * (0.1 + 0.9 * utilization / 100.0)
        return GpuSample(
            index=gpu.index,
            utilization=round(utilization, 1),
            memory_used_mb=memory,
            temperature_c=round(self._temperature[gpu.index], 1),
            power_w=round(power, 1),
        )


class NvmlSampler:
    """Readings from NVML; XID errors are counted from NVML's event stream when the driver offers it."""

    def __init__(self, gpus: list[GpuInfo]) -> None:
        pynvml.nvmlInit()
        self.gpus = gpus
        self._handles = {g.index: _handle(g) for g in gpus}
        self._xids = {g.index: 0 for g in gpus}
        self._events = self._event_set()

    def _event_set(self) -> object | None:
        try:
            events: object = pynvml.nvmlEventSetCreate()
            for handle in self._handles.values():
                pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
            return events
        except pynvml.NVMLError:
            return None

    def _drain_xids(self) -> None:
        if self._events is None:
            return
        index_of = {id(h): i for i, h in self._handles.items()}
        while True:
            try:
                event = pynvml.nvmlEventSetWait(self._events, 0)
            except pynvml.NVMLError:
                return
            index = index_of.get(id(event.device))
            if index is not None:
                self._xids[index] += 1

    def sample(self, busy: Mapping[int, float]) -> list[GpuSample]:
        self._drain_xids()
        return [self._one(index, handle) for index, handle in self._handles.items()]

    def _one(self, index: int, handle: object) -> GpuSample:
        # A MIG device answers for its memory; utilization, temperature and power are the whole GPU's
        # and NVML refuses them for a MIG handle: those read 0.
        utilization = _reading(lambda: pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        memory = _reading(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used // (1024 * 1024))
        temperature = _reading(lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))
        power = _reading(lambda: pynvml.nvmlDeviceGetPowerUsage(handle)) / 1000.0
        ecc = _reading(  # ECC off or unsupported on this board: 0
            lambda: pynvml.nvmlDeviceGetTotalEccErrors(
                handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
            )
        )
        return GpuSample(
            index=index,
            utilization=float(utilization),
            memory_used_mb=int(memory),
            temperature_c=float(temperature),
            power_w=max(0.0, power),
            ecc_uncorrectable=int(ecc),
            xid_errors=self._xids[index],
        )


def _handle(gpu: GpuInfo) -> object:
    """By UUID when known (slot numbers differ from NVML's device numbers once MIG is on)."""
    if gpu.uuid:
        return pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid)
    return pynvml.nvmlDeviceGetHandleByIndex(gpu.index)


def _reading(read: Callable[[], float]) -> float:
    try:
        return float(read())
    except pynvml.NVMLError:
        return 0.0


def sampler_for(gpus: list[GpuInfo], source: str) -> GpuSampler | None:
    if not gpus:
        return None
    if source == "nvml":
        try:
            return NvmlSampler(gpus)
        except pynvml.NVMLError:
            return None
    return FakeSampler(gpus, seed=sum(ord(c) for c in gpus[0].uuid))
