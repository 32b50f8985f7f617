"""Test helpers shipped with Corral: fluent builders (and hypothesis strategies in ``strategies``)."""

from corral.testing.builders import JobBuilder, NodeBuilder, live_alloc, make_job, make_node, snapshot

__all__ = ["JobBuilder", "NodeBuilder", "live_alloc", "make_job", "make_node", "snapshot"]
