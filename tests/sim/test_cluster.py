"""Cluster files: validation names the field; nodes, names and rack labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.model import NodeState
from corral.sim import build_nodes, load_cluster
from corral.spec import SpecError, load_cluster_yaml

CLUSTERS = Path(__file__).resolve().parents[2] / "examples" / "clusters"

GROUP = "node_groups:\n  - name: v100\n    count: 3\n    gpus_per_node: 8\n    gpu_type: V100\n"


def test_minimal_group_needs_only_count_gpus_and_type() -> None:
    spec = load_cluster_yaml("node_groups:\n  - {count: 2, gpus_per_node: 4, gpu_type: H100}\n")
    assert spec.node_groups[0].group_name == "h100"
    assert spec.total_gpus == 8
    assert spec.speed("H100") == 1.0


def test_nodes_are_numbered_per_group_with_rack_labels() -> None:
    spec = load_cluster_yaml(GROUP + "    nodes_per_rack: 2\n    gpu_memory: 32GB\n")
    nodes = build_nodes(spec)
    assert [n.name for n in nodes] == ["v100-0000", "v100-0001", "v100-0002"]
    assert [n.labels["rack"] for n in nodes] == ["v100-r000", "v100-r000", "v100-r001"]
    assert all(n.state == NodeState.READY and len(n.gpus) == 8 for n in nodes)
    assert nodes[0].gpus[0].memory_mb == 32 * 1024


def test_unnamed_groups_of_one_type_get_distinct_names() -> None:
    spec = load_cluster_yaml(
        "node_groups:\n"
        "  - {count: 1, gpus_per_node: 2, gpu_type: T4}\n"
        "  - {count: 2, gpus_per_node: 4, gpu_type: T4}\n"
        "  - {name: t4-2, count: 1, gpus_per_node: 8, gpu_type: T4}\n"
    )
    assert [g.group_name for g in spec.node_groups] == ["t4", "t4-3", "t4-2"]
    names = [n.name for n in build_nodes(spec)]
    assert names == ["t4-0000", "t4-3-0000", "t4-3-0001", "t4-2-0000"]
    assert [len(n.gpus) for n in build_nodes(spec)] == [2, 4, 4, 8]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (GROUP.replace("count: 3", "count: 0"), "node_groups[0].count"),
        (GROUP.replace("    gpu_type: V100\n", ""), "node_groups[0].gpu_type"),
        (GROUP + "    gpu_memory: lots\n", "node_groups[0].gpu_memory"),
        (GROUP + "    colour: red\n", "node_groups[0].colour"),
        (GROUP + "    nodes_per_rack: 0\n", "node_groups[0].nodes_per_rack"),
        (GROUP + "    watts_busy: -1\n", "node_groups[0].watts_busy"),
        (GROUP + "gpu_speed: {V100: 0}\n", "gpu_speed"),
        (GROUP + "gpu_speed: {V100: 1e-320}\n", "gpu_speed"),  # a job would never end
        (GROUP + "gpu_speed: {V100: 0.0009}\n", "gpu_speed"),
        (GROUP + "  - {name: v100, count: 1, gpus_per_node: 8, gpu_type: V100}\n", "node_groups[1].name"),
        ("node_groups: []\n", "node_groups"),
    ],
)
def test_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(SpecError) as info:
        load_cluster_yaml(text)
    assert field in str(info.value)


def test_not_a_mapping() -> None:
    with pytest.raises(SpecError, match="mapping with node_groups"):
        load_cluster_yaml("- 1\n")


def test_example_philly_cluster() -> None:
    nodes = build_nodes(load_cluster(CLUSTERS / "philly.yaml"))
    assert len(nodes) == 24
    assert sum(len(n.gpus) for n in nodes) == 192
    assert len({n.labels["rack"] for n in nodes}) == 3


def test_example_alibaba_cluster() -> None:
    spec = load_cluster(CLUSTERS / "alibaba.yaml")
    nodes = build_nodes(spec)
    assert len(nodes) == 1213
    assert sum(len(n.gpus) for n in nodes) == 6212
    assert {g.type for n in nodes for g in n.gpus} == {"G2", "G3", "T4", "P100", "V100M16", "V100M32", "A10"}


def test_racks_make_blocks_with_their_own_labels() -> None:
    spec = load_cluster_yaml(GROUP.replace("count: 3", "count: 5") + "    nodes_per_rack: 1\n    racks_per_block: 2\n")
    nodes = build_nodes(spec)
    assert [n.labels["rack"] for n in nodes] == ["v100-r000", "v100-r001", "v100-r002", "v100-r003", "v100-r004"]
    assert [n.labels["block"] for n in nodes] == ["v100-b000", "v100-b000", "v100-b001", "v100-b001", "v100-b002"]
    assert "block" not in build_nodes(load_cluster_yaml(GROUP + "    nodes_per_rack: 2\n"))[0].labels


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("    racks_per_block: 2\n", "racks_per_block needs nodes_per_rack"),
        ("    nodes_per_rack: 2\n    racks_per_block: 0\n", "racks_per_block"),
        ("    nodes_per_rack: 2\n    racks_per_block: true\n", "racks_per_block"),
    ],
)
def test_a_bad_block_layout_is_refused_naming_it(extra: str, said: str) -> None:
    with pytest.raises(SpecError, match=said):
        load_cluster_yaml(GROUP + extra)
