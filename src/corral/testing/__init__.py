"""Test helpers shipped with Corral: a fake clock, fluent builders (and hypothesis strategies in ``strategies``)."""

from corral.testing.builders import JobBuilder, NodeBuilder, live_alloc, make_job, make_node, running_job, snapshot
from corral.testing.clock import FakeClock

__all__ = ["FakeClock", "JobBuilder", "NodeBuilder", "live_alloc", "make_job", "make_node", "running_job", "snapshot"]
