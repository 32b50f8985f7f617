"""What-if flags: --cluster-scale, --add and --remove change the simulated cluster; bad values exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from unittest.mock import patch

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from corral.cli.main import cli
from corral.sim import load_cluster
from corral.sim.whatif import (
    MAX_GROUP_NODES,
    MAX_NODES,
    WhatIfError,
    add_gpus,
    apply_what_if,
    parse_amount,
    remove_gpus,
    scale_cluster,
)
from corral.spec import ClusterSpec, NodeGroupSpec, SpecError


def spec(*groups: tuple[str, int, int, str]) -> ClusterSpec:
    return ClusterSpec(
        node_groups=[NodeGroupSpec(name=n, count=c, gpus_per_node=g, gpu_type=t) for n, c, g, t in groups]
    )


def shape(cluster: ClusterSpec) -> list[tuple[str, int, int, str]]:
    return [(g.group_name, g.count, g.gpus_per_node, g.gpu_type) for g in cluster.node_groups]


def test_parse_amount() -> None:
    assert parse_amount("8xH100", "--add") == (8, "H100")
    assert parse_amount(" 16X a100 ", "--add") == (16, "a100")
    for bad in ("x8", "8", "0xH100", "8xH 100", "-1xV100", "\u0668xH100"):
        with pytest.raises(WhatIfError, match="--add"):
            parse_amount(bad, "--add")


def test_scale_rounds_to_the_nearest_and_drops_empty_groups() -> None:
    cluster = spec(("a", 24, 8, "V100"), ("b", 3, 8, "V100"), ("c", 1, 4, "T4"))
    assert shape(scale_cluster(cluster, 0.5)) == [("a", 12, 8, "V100"), ("b", 2, 8, "V100"), ("c", 1, 4, "T4")]
    assert shape(scale_cluster(cluster, 0.4)) == [("a", 10, 8, "V100"), ("b", 1, 8, "V100")]
    assert shape(scale_cluster(cluster, 2)) == [("a", 48, 8, "V100"), ("b", 6, 8, "V100"), ("c", 2, 4, "T4")]
    with pytest.raises(WhatIfError, match="no node would be left"):
        scale_cluster(cluster, 0.01)


def test_scale_rounds_halves_up_as_the_factor_is_written() -> None:
    # 45 x 0.7 is 31.5, a half: 32 nodes, though 45 * 0.7 in binary floating point is 31.499999999999996
    cluster = spec(("a", 45, 8, "V100"), ("b", 50, 8, "V100"), ("c", 30, 8, "V100"), ("d", 3, 8, "V100"))
    assert [count for _, count, _, _ in shape(scale_cluster(cluster, 0.7))] == [32, 35, 21, 2]
    assert [count for _, count, _, _ in shape(scale_cluster(cluster, 0.29))] == [13, 15, 9, 1]
    assert [count for _, count, _, _ in shape(scale_cluster(cluster, 2.05))] == [92, 103, 62, 6]


def test_scale_zero_then_add_replaces_the_cluster() -> None:
    cluster = spec(("a", 24, 8, "V100"))
    assert shape(apply_what_if(cluster, 0, add=["16xH100"])) == [("h100", 2, 8, "H100")]
    with pytest.raises(WhatIfError, match="no node would be left"):
        apply_what_if(cluster, 0)
    with pytest.raises(WhatIfError, match="no node would be left"):
        apply_what_if(cluster, 0, add=["16xH100"], remove=["16xH100"])


def test_a_node_group_has_at_least_one_gpu_per_node() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        NodeGroupSpec(count=2, gpus_per_node=0, gpu_type="V100")


def test_add_grows_the_first_group_of_the_type() -> None:
    cluster = spec(("a", 2, 8, "V100"), ("b", 1, 4, "V100"))
    assert shape(add_gpus(cluster, 16, "V100", "--add 16xV100")) == [("a", 4, 8, "V100"), ("b", 1, 4, "V100")]
    assert shape(add_gpus(cluster, 8, "v100", "--add 8xv100"))[0] == ("a", 3, 8, "V100")
    with pytest.raises(WhatIfError, match=r"--add 4xV100: V100 nodes \(group a\) have 8 GPUs; add a multiple of 8"):
        add_gpus(cluster, 4, "V100", "--add 4xV100")


def test_add_a_catalogue_type_makes_priced_8_gpu_nodes() -> None:
    cluster = add_gpus(spec(("h100", 1, 8, "V100")), 16, "h100", "--add 16xh100")
    added = cluster.node_groups[1]
    assert shape(cluster)[1] == ("h100-added", 2, 8, "H100")
    assert (added.price_per_gpu_hour, added.watts_busy, added.watts_idle) == (9.8, 700, 70)
    assert cluster.gpu_speed == {"H100": 4.0}
    assert shape(add_gpus(spec(("a", 1, 8, "V100")), 2, "L4", "--add 2xL4"))[1] == ("l4", 1, 2, "L4")
    with pytest.raises(WhatIfError, match="add a multiple of 8, or fewer than 8 for one node"):
        add_gpus(spec(("a", 1, 8, "V100")), 12, "L4", "--add 12xL4")


def test_add_keeps_the_speed_the_cluster_file_gives() -> None:
    cluster = ClusterSpec(node_groups=spec(("a", 1, 8, "V100")).node_groups, gpu_speed={"A100": 3.0})
    assert add_gpus(cluster, 8, "A100", "--add 8xA100").gpu_speed == {"A100": 3.0}


def test_add_keeps_the_speed_the_cluster_file_gives_whatever_the_case_of_its_key() -> None:
    cluster = ClusterSpec(node_groups=spec(("a", 1, 8, "V100")).node_groups, gpu_speed={"a100": 3.0})
    assert add_gpus(cluster, 8, "A100", "--add 8xA100").gpu_speed == {"A100": 3.0}


def test_a_type_scaled_out_of_the_file_comes_back_as_the_files_group() -> None:
    group = NodeGroupSpec(name="v100", count=4, gpus_per_node=4, gpu_type="V100", price_per_gpu_hour=2.5, watts_idle=50)
    cluster = ClusterSpec(node_groups=[group], gpu_speed={"V100": 1.5})
    after = apply_what_if(cluster, 0.0, ["8xV100"])
    assert after.node_groups == [group.model_copy(update={"count": 2})]  # its shape, price, power: not the catalogue's
    assert after.gpu_speed == {"V100": 1.5}


def test_add_an_unknown_type_names_the_catalogue() -> None:
    with pytest.raises(WhatIfError, match=r"--add 8xZ9: Z9 is neither in the cluster file nor in the built-in"):
        add_gpus(spec(("a", 1, 8, "V100")), 8, "Z9", "--add 8xZ9")


def test_remove_takes_whole_nodes_from_the_last_group_backwards() -> None:
    cluster = spec(("a", 2, 8, "V100"), ("t", 1, 4, "T4"), ("b", 1, 4, "V100"))
    assert shape(remove_gpus(cluster, 12, "V100", "--remove 12xV100")) == [("a", 1, 8, "V100"), ("t", 1, 4, "T4")]
    assert shape(remove_gpus(cluster, 20, "V100", "--remove 20xV100")) == [("t", 1, 4, "T4")]
    with pytest.raises(WhatIfError, match="the cluster has only 20 V100 GPUs"):
        remove_gpus(cluster, 24, "V100", "--remove 24xV100")
    with pytest.raises(WhatIfError, match=r"no whole V100 nodes \(2×8, 1×4 GPUs\) add up to 2 GPUs; the nearest.* 4$"):
        remove_gpus(cluster, 2, "V100", "--remove 2xV100")
    with pytest.raises(WhatIfError, match=r"add up to 6 GPUs; the nearest counts that do: 4 and 8$"):
        remove_gpus(cluster, 6, "V100", "--remove 6xV100")
    with pytest.raises(WhatIfError, match="no H100 GPUs; its GPU types are V100, T4"):
        remove_gpus(cluster, 8, "H100", "--remove 8xH100")
    with pytest.raises(WhatIfError, match="no node would be left"):
        remove_gpus(spec(("a", 1, 8, "V100")), 8, "V100", "--remove 8xV100")


def test_remove_finds_whole_nodes_over_several_groups_when_the_last_ones_alone_cannot() -> None:
    # 12 = 8 + 4 and 20 = 8 + 8 + 4: taking from the last group first (one 4-GPU node left then 8 from "a").
    cluster = spec(("a", 3, 8, "V100"), ("b", 2, 4, "V100"), ("c", 1, 8, "A100"))
    assert shape(remove_gpus(cluster, 12, "V100", "--remove 12xV100")) == [
        ("a", 2, 8, "V100"),
        ("b", 1, 4, "V100"),
        ("c", 1, 8, "A100"),
    ]
    assert shape(remove_gpus(cluster, 20, "V100", "--remove 20xV100")) == [
        ("a", 1, 8, "V100"),
        ("b", 1, 4, "V100"),
        ("c", 1, 8, "A100"),
    ]
    assert shape(remove_gpus(cluster, 8, "V100", "--remove 8xV100")) == [("a", 3, 8, "V100"), ("c", 1, 8, "A100")]


def test_flags_apply_in_order_scale_add_remove() -> None:
    cluster = apply_what_if(spec(("a", 2, 8, "V100")), 1.5, ["8xV100"], ["16xV100"])
    assert shape(cluster) == [("a", 2, 8, "V100")]  # 2 × 1.5 = 3 nodes, +1, −2


SIXTEEN_JOBS = "job_id,submit_time_s,duration_s,num_gpus\n" + "".join(f"j{i},0,100,1\n" for i in range(16))


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    trace = tmp_path / "trace.csv"
    trace.write_text(SIXTEEN_JOBS)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("node_groups:\n  - {name: v100, count: 1, gpus_per_node: 8, gpu_type: V100}\n")
    return trace, cluster


def sim(files: tuple[Path, Path], *args: str) -> tuple[int, str]:
    trace, cluster = files
    result = CliRunner().invoke(
        cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "--policy", "fifo", *args]
    )
    return result.exit_code, result.output


def figure(files: tuple[Path, Path], name: str, *args: str) -> float:
    code, out = sim(files, *args, "-o", "json")
    assert code == 0, out
    return float(json.loads(out)["policies"]["fifo"][name])


def makespan(files: tuple[Path, Path], *args: str) -> float:
    return figure(files, "makespan_s", *args)


def test_doubling_the_gpus_halves_the_makespan(files: tuple[Path, Path]) -> None:
    # 16 one-GPU jobs of 100 s: two waves on 8 GPUs, one wave on 16.
    assert makespan(files) == 200
    assert makespan(files, "--cluster-scale", "2") == 100
    assert makespan(files, "--add", "8xV100") == 100
    assert makespan(files, "--add", "16xV100", "--remove", "8xV100") == 100
    # The new A100s run at the catalogue's speed, 2.2: half the jobs take 100 / 2.2 s.
    assert figure(files, "avg_jct_s", "--add", "8xA100") == pytest.approx((100 + 100 / 2.2) / 2)


def test_the_json_and_the_table_show_the_simulated_cluster(files: tuple[Path, Path]) -> None:
    code, out = sim(files, "--add", "8xH100", "-o", "json")
    assert code == 0, out
    cluster = json.loads(out)["cluster"]
    assert [(g["name"], g["count"], g["gpu_type"]) for g in cluster["node_groups"]] == [
        ("v100", 1, "V100"),
        ("h100", 1, "H100"),
    ]
    assert (cluster["nodes"], cluster["gpus"]) == (2, 16)
    assert cluster["cost_per_hour"] == pytest.approx(8 * 2.48 + 8 * 9.8)
    code, out = sim(files, "--cluster-scale", "3")
    assert code == 0, out
    assert "16 jobs from trace.csv on 3 nodes, 24 GPUs: v100 3×8 V100" in out


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--add", "eightxV100"], "--add 'eightxV100': expected NxTYPE"),
        (["--add", "8xZ9"], "--add 8xZ9: Z9 is neither in the cluster file nor in the built-in catalogue (K80"),
        (["--remove", "16xV100"], "--remove 16xV100: the cluster has only 8 V100 GPUs"),
        (["--remove", "8xV100"], "--remove 8xV100: no node would be left"),
        (["--cluster-scale", "-1"], "--cluster-scale"),
        (["--cluster-scale", "\uff12"], "'--cluster-scale': '\uff12' is not a number"),
        (["--limit", "10_0"], "'--limit': '10_0' is not a whole number written with the digits 0-9"),
        (["--add", "9" * 5000 + "xV100"], "N has 5,000 digits, more GPUs than a cluster holds (1,000,000 nodes"),
        (["--remove", "1" * 5000 + "xV100"], "--remove 1111"),
        (["--add", "0" * 5000 + "3xV100"], "have 8 GPUs; add a multiple of 8"),  # 3 GPUs, as 03xV100 would be
    ],
)
def test_bad_what_if_flags_exit_2_naming_the_flag(files: tuple[Path, Path], args: list[str], text: str) -> None:
    code, out = sim(files, *args)
    assert code == 2
    assert text in " ".join(out.split())


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            ["--cluster-scale", "inf"],
            "'--cluster-scale': 'inf': expected a finite number at least 0 and at most 100,000",
        ),
        (["--cluster-scale", "1e7"], "'--cluster-scale': '1e7'"),
        (["--add", "8000000000xV100"], "--add 8000000000xV100: node group v100 would have 1,000,000,001 nodes;"),
        (["--add", "8000000xH100"], "--add 8000000xH100: the new H100 node group would have 1,000,000 nodes;"),
        (["--cluster-scale", "100001"], "--cluster-scale"),
    ],
)
def test_what_if_sizes_beyond_the_cluster_files_bound_exit_2_before_building(
    files: tuple[Path, Path], args: list[str], text: str
) -> None:
    with patch("corral.sim.build_nodes", side_effect=AssertionError("built")):
        code, out = sim(files, *args)
    assert code == 2, out
    assert text in " ".join(out.split())
    if args[0] == "--add":
        assert f"a node group has at most {MAX_GROUP_NODES:,}" in out


def test_the_group_bound_is_the_cluster_files() -> None:
    NodeGroupSpec(count=MAX_GROUP_NODES, gpus_per_node=8, gpu_type="V100")
    with pytest.raises(ValidationError):
        NodeGroupSpec(count=MAX_GROUP_NODES + 1, gpus_per_node=8, gpu_type="V100")


def test_the_whole_cluster_is_bounded_too() -> None:
    groups = [(f"g{i}", MAX_GROUP_NODES, 8, "V100") for i in range(MAX_NODES // MAX_GROUP_NODES)]
    with pytest.raises(WhatIfError, match=f"--add 8xH100: the cluster would have {MAX_NODES + 1:,} nodes"):
        apply_what_if(spec(*groups), add=["8xH100"])
    with pytest.raises(WhatIfError, match="--cluster-scale 2: node group g0 would have 200,000 nodes"):
        scale_cluster(spec(*groups), 2)


def test_a_node_group_number_is_not_a_boolean() -> None:
    with pytest.raises(ValidationError, match="must be a number, not true"):
        NodeGroupSpec.model_validate({"count": True, "gpus_per_node": 8, "gpu_type": "V100"})


def groups_file(path: Path, groups: int, count: int) -> Path:
    lines = [f"  - {{name: g{i}, count: {count}, gpus_per_node: 1, gpu_type: V100}}\n" for i in range(groups)]
    path.write_text("node_groups:\n" + "".join(lines))
    return path


def test_a_cluster_file_of_more_than_max_nodes_is_refused_on_loading(tmp_path: Path) -> None:
    at_most = groups_file(tmp_path / "at_most.yaml", MAX_NODES // MAX_GROUP_NODES, MAX_GROUP_NODES)
    assert sum(g.count for g in load_cluster(at_most).node_groups) == MAX_NODES
    over = groups_file(tmp_path / "over.yaml", MAX_NODES // MAX_GROUP_NODES + 1, MAX_GROUP_NODES)
    with pytest.raises(SpecError, match=f"node_groups: the cluster file has {MAX_NODES + MAX_GROUP_NODES:,} nodes"):
        load_cluster(over)


@pytest.mark.parametrize(
    "args",
    [[], ["--cluster-scale", "0.5"], ["--add", "8xV100"], ["--add", "8xH100"], ["--remove", "1xV100"]],
)
def test_a_cluster_file_beyond_the_bound_exits_2_before_building_whatever_the_flags(
    files: tuple[Path, Path], tmp_path: Path, args: list[str]
) -> None:
    cluster = groups_file(tmp_path / "big.yaml", 11, MAX_GROUP_NODES)
    with patch("corral.sim.build_nodes", side_effect=AssertionError("built")):
        code, out = sim((files[0], cluster), *args)
        assert code == 2, out
        assert "--cluster: node_groups: the cluster file has 1,100,000 nodes in all; at most 1,000,000" in out
        plan = CliRunner().invoke(
            cli, ["sim", "plan", "--trace", str(files[0]), "--cluster", str(cluster), "--target-p95-wait", "1h"]
        )
        assert plan.exit_code == 2, plan.output
        assert "the cluster file has 1,100,000 nodes" in plan.output


def test_what_if_flags_that_pass_the_bound_exit_2_before_building(files: tuple[Path, Path], tmp_path: Path) -> None:
    cluster = groups_file(tmp_path / "ten.yaml", 10, MAX_GROUP_NODES - 1)
    with patch("corral.sim.build_nodes", side_effect=AssertionError("built")):
        code, out = sim((files[0], cluster), "--add", "80xH100", "--add", "8xH100", "--remove", "8xH100")
        assert code == 2, out
        assert "--add 8xH100: the cluster would have 1,000,001 nodes; at most 1,000,000" in " ".join(out.split())
