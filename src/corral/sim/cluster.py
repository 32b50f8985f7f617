"""A ClusterSpec as the scheduler's nodes: ``v100-0007`` with ``rack=v100-r00`` labels."""

from __future__ import annotations

from pathlib import Path

from corral.model import Gpu, Node, NodeState
from corral.spec import ClusterSpec, FieldError, SpecError, load_cluster_yaml

MAX_NODES = 1_000_000  # nodes in a simulated cluster, all groups together


def load_cluster(path: Path | str) -> ClusterSpec:
    """Read and validate a cluster file; ``SpecError`` names the bad field, and a file of more than
    ``MAX_NODES`` nodes is refused here, before any node is built."""
    spec = load_cluster_yaml(Path(path).read_text(encoding="utf-8"), source=str(path))
    total = sum(g.count for g in spec.node_groups)
    if total > MAX_NODES:
        message = f"the cluster file has {total:,} nodes in all; at most {MAX_NODES:,} can be simulated"
        raise SpecError([FieldError("node_groups", message)])
    return spec


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
            nodes.append(Node(name=f"{prefix}-{number:04d}", state=NodeState.READY, gpus=gpus, labels=labels))
    return tuple(nodes)


def describe(spec: ClusterSpec) -> str:
    """The cluster's node groups in one line: ``v100 24×8 V100, h100 2×8 H100`` (name, nodes × GPUs, type)."""
    return ", ".join(f"{g.group_name} {g.count}×{g.gpus_per_node} {g.gpu_type}" for g in spec.node_groups)
