"""Wording shared by reasons and feasibility messages: counts, sizes and a node's share of a request;
and how a figure is written out in CSV files."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

from corral.model import Request


def number(value: float) -> str:
    """``4`` for 4.0, ``0.5`` for 0.5, ``1000000`` for a million (never ``1e+06``)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def plain_decimal(value: float) -> str:
    """``0.000023`` for 2.3e-05, ``100.0`` for 100.0, ``4`` for the int 4: every digit of Python's shortest
    round trip, never in exponent notation, so a CSV cell reads as a plain decimal everywhere."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return repr(value)
    text = format(Decimal(repr(value)), "f")
    return text if "." in text else text + ".0"


def memory(mb: int) -> str:
    """``80GB`` for 81920 MiB, ``1.5GB`` for 1536, ``512MB`` for 512, ``2TB`` for 2097152."""
    if mb >= 1024 * 1024 and mb % (1024 * 1024) == 0:
        return f"{mb // (1024 * 1024)}TB"
    if mb >= 1024:
        return f"{mb / 1024:g}GB" if mb % 1024 == 0 else f"{mb / 1024:.1f}GB"
    return f"{mb}MB"


def plural(count: float, word: str) -> str:
    """``1 node``, ``2 nodes``."""
    return f"{number(count)} {word if count == 1 else word + 's'}"


def either(names: Sequence[str]) -> str:
    """``H100``, ``H100 or A100``, ``H100, A100 or L4``."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} or {names[-1]}"


def and_list(parts: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(parts) <= 1:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} and {parts[-1]}"


def share(request: Request, gpu_types: Sequence[str], free: bool = False) -> str:
    """One node's share of a request, e.g. ``4 free H100 GPUs, 16 CPUs and 64GB memory``."""
    adjective = "free " if free else ""
    kind = f"{either(gpu_types)} " if gpu_types else ""
    parts: list[str] = []
    if request.fractional:
        parts.append(f"{number(request.gpus_per_node)} of one {adjective}{kind}GPU")
    elif request.gpus_per_node > 0:
        count = request.gpu_slots_per_node
        parts.append(f"{count} {adjective}{kind}GPU{'' if count == 1 else 's'}")
    if request.cpus_per_node is not None:
        cpus = request.cpus_per_node
        parts.append(f"{number(cpus)} {'' if parts else adjective}CPU{'' if cpus == 1 else 's'}")
    if request.memory_mb_per_node is not None:
        parts.append(f"{memory(request.memory_mb_per_node)} {'' if parts else adjective}memory")
    if request.container:
        parts.append("a container runtime")
    return and_list(parts) or NOTHING_RESERVED


NOTHING_RESERVED = "no reserved resources"
"""What ``share`` says of a request that reserves nothing on a node (a CPU-only job without cpus or memory)."""


def nodes_with(request: Request, gpu_types: Sequence[str], free: bool = False) -> str:
    """``2 nodes with 8 H100 GPUs each``, ``1 node with 4 CPUs``; ``3 nodes`` for a request that reserves nothing."""
    each = share(request, gpu_types, free)
    nodes = plural(request.nodes, "node")
    if each == NOTHING_RESERVED:
        return nodes
    return f"{nodes} with {each}{' each' if request.nodes > 1 else ''}"
