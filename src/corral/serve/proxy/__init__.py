"""The gateway: routes ``/s/SERVICE/...`` to ready replicas; counts load for the autoscaler."""
