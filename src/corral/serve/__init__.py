"""Services: the pure balancing and autoscaling policies, the rollout decision, and the gateway.

``lb``, ``autoscale`` and ``rollout`` are pure functions over small frozen values (no I/O, no
clock, randomness only through a generator handed in); ``proxy`` is the gateway, the only part
that does I/O.
"""
