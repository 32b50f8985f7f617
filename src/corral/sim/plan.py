"""Size a cluster: the cheapest one on which the trace's p95 wait meets a target.

Candidates are families of clusters that grow with one number ``n`` (``corral.sim.families``):
``n`` nodes of one GPU type, or the cluster file's mix scaled to about ``n`` nodes. For each,
the search first finds the smallest ``n`` on which every job fits (no simulation), then doubles
``n`` until the p95 wait meets the target and bisects back to the smallest ``n`` that does, as if
more nodes never raised the p95 wait (true in practice, not guaranteed). The search stops at the
family's zero-wait size, where every job can start on arrival, or at ``max_gpus``. Each ``n``
simulated counts once; the cheapest meeting configuration per hour wins (ties: fewer GPUs). A size
so small that its simulated clock runs past the engine's limit (``SimulationError``) misses the
target: it has no figures, and the search goes on with larger sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corral.sched import Policy
from corral.sim.cluster import build_nodes
from corral.sim.costs import cost_per_hour, group_rates
from corral.sim.engine import SimulationError, simulate
from corral.sim.families import Family
from corral.sim.metrics import Summary, summarize
from corral.sim.trace import Trace
from corral.sim.workload import prepare
from corral.spec import ClusterSpec

TOLERANCE_S = 1e-6  # a p95 wait this close above the target still meets it (floating-point sums)


@dataclass(frozen=True)
class Trial:
    """One simulated size of a family; ``summary`` is None when its simulated clock ran past the engine's
    limit (``overrun`` says so), which misses the target."""

    size: int
    spec: ClusterSpec
    summary: Summary | None
    cost_per_hour: float
    meets: bool
    overrun: str | None = None  # the engine's message when the simulation ran past its clock limit


@dataclass(frozen=True)
class Outcome:
    """A family's answer: its smallest meeting trial, else its largest tried, else why it cannot run the trace."""

    family: str
    trial: Trial | None
    simulations: int
    reason: str | None = None

    @property
    def meets(self) -> bool:
        return self.trial is not None and self.trial.meets


@dataclass(frozen=True)
class PlanResult:
    target_s: float
    outcomes: tuple[Outcome, ...]
    simulations: int
    recommended: Outcome | None = None


def plan(
    trace: Trace,
    families: Sequence[Family],
    policy: Policy,
    target_s: float,
    *,
    max_gpus: int | None = None,
    checkpoint_s: float = 0.0,
    on_trial: Callable[[str, int], None] | None = None,
) -> PlanResult:
    """Search every family; ``recommended`` is the cheapest per hour that meets the target, if any.

    ``on_trial`` hears of each simulation as it starts: the family's name and the cluster's GPUs.
    """
    outcomes = tuple(
        _Search(trace, family, policy, target_s, max_gpus, checkpoint_s, on_trial).run() for family in families
    )
    meeting = [(o.trial, o) for o in outcomes if o.trial is not None and o.trial.meets]
    best = min(meeting, key=lambda pair: (pair[0].cost_per_hour, pair[0].spec.total_gpus, pair[1].family), default=None)
    return PlanResult(target_s, outcomes, sum(o.simulations for o in outcomes), best[1] if best else None)


class _Search:
    def __init__(
        self,
        trace: Trace,
        family: Family,
        policy: Policy,
        target_s: float,
        max_gpus: int | None,
        checkpoint_s: float,
        on_trial: Callable[[str, int], None] | None,
    ) -> None:
        self.trace = trace
        self.family = family
        self.policy = policy
        self.target_s = target_s
        self.max_gpus = max_gpus
        self.checkpoint_s = checkpoint_s
        self.on_trial = on_trial
        self.trials: dict[int, Trial] = {}

    def run(self) -> Outcome:
        family = self.family
        if family.problem:
            return Outcome(family.name, None, 0, family.problem)
        if not self._fits(family.fits_by):
            return Outcome(family.name, None, 0, "some jobs can never run on it (they ask for other GPU types)")
        low = _first(1, family.fits_by, self._fits)
        top = max(low, family.zero_wait)
        cap = self.max_gpus
        high = top if cap is None else _last_within(low, top, lambda n: self._gpus(n) <= cap)
        if high is None:
            gpus = self._gpus(low)
            return Outcome(family.name, None, 0, f"every job fits only from {gpus} GPUs, above --max-gpus")
        meets = self._gallop(low, high)
        trial = self.trials[meets] if meets is not None else self.trials[high]
        return Outcome(family.name, trial, len(self.trials))

    def _gallop(self, low: int, high: int) -> int | None:
        """The smallest size in [low, high] that meets the target: doubling, then bisection."""
        failed, size = low - 1, low
        while not self._trial(size).meets:
            if size == high:
                return None
            failed, size = size, min(high, size * 2)
        return _first(failed + 1, size, lambda n: self._trial(n).meets)

    def _trial(self, size: int) -> Trial:
        if size not in self.trials:
            spec = self.family.build(size)
            if self.on_trial is not None:
                self.on_trial(self.family.name, spec.total_gpus)
            nodes = build_nodes(spec)
            workload = prepare(self.trace, nodes)
            rates = group_rates(spec)
            try:
                result = simulate(
                    workload,
                    nodes,
                    self.policy,
                    spec.gpu_speed,
                    checkpoint_s=self.checkpoint_s,
                    cross_rack_slowdown=spec.cross_rack_slowdown,
                )
            except SimulationError as exc:  # too small to replay the trace within the clock: it misses
                self.trials[size] = Trial(size, spec, None, cost_per_hour(rates), False, str(exc))
                return self.trials[size]
            summary = summarize(result, rates)
            meets = summary.p95_wait_s <= self.target_s + TOLERANCE_S and result.unfinished == 0
            self.trials[size] = Trial(size, spec, summary, cost_per_hour(rates), meets)
        return self.trials[size]

    def _fits(self, size: int) -> bool:
        return prepare(self.trace, build_nodes(self.family.build(size))).skipped_total == 0

    def _gpus(self, size: int) -> int:
        return self.family.build(size).total_gpus


def _first(low: int, high: int, ok: Callable[[int], bool]) -> int:
    """The smallest n in [low, high] with ok(n), for ok false then true as n grows and ok(high) true."""
    while low < high:
        middle = (low + high) // 2
        if ok(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _last_within(low: int, high: int, ok: Callable[[int], bool]) -> int | None:
    """The largest n in [low, high] with ok(n), for ok true then false as n grows; None if not ok(low)."""
    if not ok(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if ok(middle):
            low = middle
        else:
            high = middle - 1
    return low
