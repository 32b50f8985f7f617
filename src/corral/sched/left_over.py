"""Room that victims already given to a job leave over once they stop.

A job that must wait for victims to stop often takes less than they free: a quarter of a stopping
job's GPU, two GPUs of a four-GPU victim's node. A later job of the same cycle may wait for that rest
instead of preempting more jobs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from corral.model import EPSILON, Allocation, Job
from corral.sched.placement import find_placement
from corral.sched.plan import Placement
from corral.sched.snapshot import CapacityView


class LeftOver:
    """Per node, the GPUs that the victims given to jobs this cycle will free beyond what those jobs hold."""

    def __init__(self, held: Mapping[str, Sequence[Allocation]]) -> None:
        self._held = held
        self._spare: dict[str, float] = defaultdict(float)
        self._victims_on: dict[str, list[str]] = defaultdict(list)

    def note(self, placement: Placement, new_victims: Sequence[str]) -> None:
        """``placement`` is held on victims, of which ``new_victims`` were given to no job before: they will
        free what they hold."""
        for v in new_victims:
            for allocation in self._held[v]:
                self._spare[allocation.node] += len(allocation.gpus) * allocation.gpu_fraction
                if not self._victims_on[allocation.node] or self._victims_on[allocation.node][-1] != v:
                    self._victims_on[allocation.node].append(v)
        for allocation in placement.allocations:
            self._spare[allocation.node] -= len(allocation.gpus) * allocation.gpu_fraction

    def fit(self, view: CapacityView, job: Job) -> tuple[Placement, tuple[str, ...]] | None:
        """Where the job fits once those victims stop, and the ones it then waits for; ``view`` is unchanged.
        Only nodes whose spare GPUs, with the empty ones there, could hold a share are tried."""
        request = job.request
        if request.gpus_per_node <= 0 or not self._spare:
            return None
        nodes = view.nodes
        room = [
            name
            for name, spare in self._spare.items()
            if spare > EPSILON
            and (node := nodes.get(name)) is not None
            and spare + node.free_gpus + EPSILON >= request.gpus_per_node
        ]
        if len(room) < request.nodes:
            return None
        victims = list(dict.fromkeys(v for name in room for v in self._victims_on[name]))
        for v in victims:
            view.release(self._held[v])
        try:
            placement = find_placement(view, job)
        finally:
            for v in victims:
                view.take(self._held[v])
        if placement is None:
            return None
        placed_on = {a.node for a in placement.allocations}
        waits = tuple(sorted(v for v in victims if any(a.node in placed_on for a in self._held[v])))
        return (placement, waits) if waits else None
