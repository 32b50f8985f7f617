"""GPU discovery: NVML where it works, a fake inventory where told to."""

from corral.agent.gpus.base import GpuDiscovery, Inventory
from corral.agent.gpus.fake import FakeGpus
from corral.agent.gpus.nvml import NvmlGpus, short_type

__all__ = ["FakeGpus", "GpuDiscovery", "Inventory", "NvmlGpus", "short_type"]
