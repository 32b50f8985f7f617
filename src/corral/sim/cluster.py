"""A ClusterSpec as the scheduler's nodes: ``v100-0007`` with ``rack=v100-r000`` (and ``block=v100-b000``) labels."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from corral.model import Gpu, Node, NodeState
from corral.spec import ClusterSpec, FieldError, SpecError, load_yaml_document, parse_cluster_spec, parse_memory_mb
from corral.spec.quantities import MEMORY_HELP
from corral.spec.wording import shown

MAX_NODES = 1_000_000  # nodes in a simulated cluster, all groups together
MAX_RATE = 1_000_000.0
"""The largest price per GPU-hour, and the most watts per GPU, a node group may give: far above any real
GPU's, and low enough that cost and energy stay finite numbers for any simulated cluster and makespan."""
RATE_FIELDS = ("price_per_gpu_hour", "watts_busy", "watts_idle")

GPU_MEMORY_HELP = "a size such as 80GB, 80GiB, 80Gi, 80G or 81920MB (binary units: 1GB = 1GiB = 1024MB)"


def load_cluster(path: Path | str) -> ClusterSpec:
    """Read and validate a cluster file; ``SpecError`` names the bad field. A file of more than
    ``MAX_NODES`` nodes is refused here, before any node is built, and so is a price or power above
    ``MAX_RATE``."""
    source = str(path)
    document = load_yaml_document(Path(path).read_text(encoding="utf-8"), source)
    spec = parse_cluster_spec(_memory_in_mb(document), source)
    total = sum(g.count for g in spec.node_groups)
    if total > MAX_NODES:
        message = f"the cluster file has {total:,} nodes in all; at most {MAX_NODES:,} can be simulated"
        raise SpecError([FieldError("node_groups", message)])
    _check_rates(spec)
    return spec


def gpu_memory_mb(value: object) -> int:
    """A ``gpu_memory`` in MiB, in every form Corral reads memory in (``corral.spec.parse_memory_mb``:
    ``80GB``, ``80GiB``, ``80Gi``, ``80G``, a number of MiB); 0 only when written as a number, so that a
    size below 1MB is not taken for "unknown"."""
    if not isinstance(value, str | int | float):
        raise ValueError(f"expected {GPU_MEMORY_HELP}, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite size, got {value}; expected {GPU_MEMORY_HELP}")
    try:
        megabytes = parse_memory_mb(value)
    except ValueError as exc:
        raise ValueError(str(exc).replace(MEMORY_HELP, GPU_MEMORY_HELP)) from None
    if megabytes == 0 and isinstance(value, str):
        raise ValueError(f"{value!r} is less than 1MB: give at least 1MB, such as 80GB or 80Gi, or leave it out")
    return megabytes


def _memory_in_mb(document: Any) -> Any:
    """The decoded file with every node group's ``gpu_memory`` read as MiB (the spec takes that number as
    it is); a size that cannot be read is a ``SpecError`` naming the field and the forms accepted."""
    groups = document.get("node_groups") if isinstance(document, dict) else None
    if not isinstance(groups, list):
        return document  # the spec names what is wrong with it
    read: list[Any] = []
    errors: list[FieldError] = []
    for index, group in enumerate(groups):
        if isinstance(group, dict) and group.get("gpu_memory") is not None:
            try:
                group = {**group, "gpu_memory": gpu_memory_mb(group["gpu_memory"])}
            except ValueError as exc:
                errors.append(FieldError(f"node_groups[{index}].gpu_memory", str(exc)))
        read.append(group)
    if errors:
        raise SpecError(errors)
    return {**document, "node_groups": read}


def _check_rates(spec: ClusterSpec) -> None:
    """Every price and power at most ``MAX_RATE``: a larger one would make cost or energy infinite."""
    errors = [
        FieldError(f"node_groups[{index}].{name}", f"must be at most {MAX_RATE:,.0f}, got {value:g}")
        for index, group in enumerate(spec.node_groups)
        for name in RATE_FIELDS
        if (value := getattr(group, name)) is not None and value > MAX_RATE
    ]
    if errors:
        raise SpecError(errors)


def build_nodes(spec: ClusterSpec) -> tuple[Node, ...]:
    """One READY node per node of every group, numbered within its group."""
    nodes: list[Node] = []
    for group in spec.node_groups:
        prefix = group.group_name
        memory_mb = group.gpu_memory_mb or 0
        gpus = tuple(Gpu(index=i, type=group.gpu_type, memory_mb=memory_mb) for i in range(group.gpus_per_node))
        for number in range(group.count):
            labels = {"group": prefix, "gpu_type": group.gpu_type}
            if group.nodes_per_rack:
                labels["rack"] = f"{prefix}-r{number // group.nodes_per_rack:03d}"
                if group.racks_per_block:
                    labels["block"] = f"{prefix}-b{number // (group.nodes_per_rack * group.racks_per_block):03d}"
            nodes.append(Node(name=f"{prefix}-{number:04d}", state=NodeState.READY, gpus=gpus, labels=labels))
    return tuple(nodes)


def describe(spec: ClusterSpec) -> str:
    """The cluster's node groups in one line: ``v100 24×8 V100, h100 2×8 H100`` (name, nodes × GPUs, type)."""
    return ", ".join(f"{g.group_name} {g.count}×{g.gpus_per_node} {g.gpu_type}" for g in spec.node_groups)
