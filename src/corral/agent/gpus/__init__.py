"""GPU discovery: NVML where it works, a fake inventory where told to."""

from corral.agent.gpus.base import GpuDiscovery, HostDevice, Inventory
from corral.agent.gpus.fake import FakeGpus
from corral.agent.gpus.nvml import NvmlGpus, short_type
from corral.agent.gpus.sampling import FakeSampler, GpuSampler, NvmlSampler, sampler_for

__all__ = [
    "FakeGpus",
    "FakeSampler",
    "GpuDiscovery",
    "GpuSampler",
    "HostDevice",
    "Inventory",
    "NvmlGpus",
    "NvmlSampler",
    "sampler_for",
    "short_type",
]
