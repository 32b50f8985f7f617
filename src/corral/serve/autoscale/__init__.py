"""Autoscaling: (load window, replicas, policy state) → (replicas, state), pure."""

from corral.serve.autoscale.policy import AutoscalePolicy, AutoscaleState, LoadSample, decide_replicas

__all__ = ["AutoscalePolicy", "AutoscaleState", "LoadSample", "decide_replicas"]
