"""What a simulated cluster costs and draws: money per GPU-hour and energy per node group.

Each node group's price and power come from the cluster file; a value the file leaves out comes
from the built-in catalogue (``corral.sim.catalogue``) for the group's GPU type, and is 0 for a
type the catalogue does not list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from corral.sim.catalogue import lookup
from corral.spec import ClusterSpec, NodeGroupSpec

JOULES_PER_KWH = 3_600_000.0


@dataclass(frozen=True, slots=True)
class GroupRates:
    """A node group's GPUs and what one of them costs per hour and draws busy and idle."""

    group: str
    gpu_type: str
    gpus: int
    price_per_gpu_hour: float
    watts_busy: float
    watts_idle: float


@dataclass(frozen=True, slots=True)
class Spend:
    """Money and energy over a run: the whole cluster for the makespan, and the busy GPUs alone."""

    cost: float
    busy_cost: float
    energy_kwh: float


def group_rates(spec: ClusterSpec) -> tuple[GroupRates, ...]:
    """Every node group's rates: the cluster file's values, else the catalogue's, else 0."""
    return tuple(_rates(group) for group in spec.node_groups)


def _rates(group: NodeGroupSpec) -> GroupRates:
    defaults = lookup(group.gpu_type)

    def pick(given: float | None, default: float | None) -> float:
        return float(given if given is not None else (default or 0.0))  # a float in JSON, whatever its source

    return GroupRates(
        group=group.group_name,
        gpu_type=group.gpu_type,
        gpus=group.count * group.gpus_per_node,
        price_per_gpu_hour=pick(group.price_per_gpu_hour, defaults.price_per_gpu_hour if defaults else None),
        watts_busy=pick(group.watts_busy, defaults.watts_busy if defaults else None),
        watts_idle=pick(group.watts_idle, defaults.watts_idle if defaults else None),
    )


def unrated(spec: ClusterSpec) -> list[str]:
    """Node groups whose price or power is in neither the cluster file nor the catalogue (counted as 0)."""
    missing = []
    for group in spec.node_groups:
        if lookup(group.gpu_type) is not None:
            continue
        fields = [name for name in ("price_per_gpu_hour", "watts_busy", "watts_idle") if getattr(group, name) is None]
        if fields:
            missing.append(f"node group {group.group_name} ({group.gpu_type}) has no {', '.join(fields)}")
    return missing


def cost_per_hour(rates: Iterable[GroupRates]) -> float:
    """What the whole cluster costs for one hour."""
    return sum(r.gpus * r.price_per_gpu_hour for r in rates)


def spend(rates: Iterable[GroupRates], busy_gpu_s: Mapping[str, float], makespan_s: float) -> Spend:
    """Cost of every GPU over the makespan, cost of the busy GPU-hours, and energy in kWh.

    Energy = busy GPU-seconds × watts_busy + idle GPU-seconds × watts_idle, per node group,
    where idle = the group's GPUs × makespan − its busy GPU-seconds.
    """
    cost = busy_cost = joules = 0.0
    for r in rates:
        busy = busy_gpu_s.get(r.group, 0.0)
        capacity = r.gpus * makespan_s
        idle = max(0.0, capacity - busy)
        cost += capacity / 3600 * r.price_per_gpu_hour
        busy_cost += busy / 3600 * r.price_per_gpu_hour
        joules += busy * r.watts_busy + idle * r.watts_idle
    return Spend(cost=cost, busy_cost=busy_cost, energy_kwh=joules / JOULES_PER_KWH)
