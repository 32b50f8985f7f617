"""Rough defaults for common GPU types: price, power and speed, for types a cluster file leaves out.

Prices are typical on-demand cloud list prices per GPU-hour in US dollars (2024-2025, rounded),
watts are the board's TDP when busy and a typical idle draw, and speed is the run-time speed-up
relative to a V100 (1.0) for training work. They are coarse on purpose: a cluster file's
``price_per_gpu_hour``, ``watts_busy``, ``watts_idle`` and ``gpu_speed`` always win.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuDefaults:
    """What the simulator assumes about a GPU type the cluster file does not describe."""

    gpu_type: str
    price_per_gpu_hour: float
    watts_busy: float
    watts_idle: float
    speed: float  # relative to a V100
    memory_gb: int


CATALOGUE: dict[str, GpuDefaults] = {
    d.gpu_type: d
    for d in (
        GpuDefaults("K80", 0.45, 150, 25, 0.3, 12),
        GpuDefaults("P100", 1.46, 250, 30, 0.6, 16),
        GpuDefaults("V100", 2.48, 300, 40, 1.0, 32),
        GpuDefaults("T4", 0.35, 70, 10, 0.3, 16),
        GpuDefaults("A10", 1.00, 150, 20, 0.7, 24),
        GpuDefaults("L4", 0.70, 72, 12, 0.5, 24),
        GpuDefaults("A100", 3.67, 400, 50, 2.2, 80),
        GpuDefaults("L40S", 1.90, 350, 35, 1.8, 48),
        GpuDefaults("H100", 9.80, 700, 70, 4.0, 80),
        GpuDefaults("H200", 10.60, 700, 70, 4.6, 141),
        GpuDefaults("B200", 14.00, 1000, 100, 8.0, 192),
    )
}

_BY_LOWER = {name.lower(): d for name, d in CATALOGUE.items()}


def lookup(gpu_type: str) -> GpuDefaults | None:
    """The defaults for a GPU type, matched without regard to case; None when it is not listed."""
    return _BY_LOWER.get(gpu_type.lower())


def known_types() -> str:
    """The listed types, for error messages: ``K80, P100, …``."""
    return ", ".join(CATALOGUE)
