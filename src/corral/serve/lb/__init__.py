"""Load balancing: choose a replica for a request (pure)."""

from corral.serve.lb.policy import ReplicaView, RequestView, Rng, choose_replica

__all__ = ["ReplicaView", "RequestView", "Rng", "choose_replica"]
