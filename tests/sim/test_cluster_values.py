"""Cluster file values: GPU memory in every form Corral reads (Kubernetes' ``32Gi`` too), and prices and
powers bounded so that cost and energy stay finite; bad values exit 2 naming the field."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sim import build_nodes, load_cluster
from corral.sim.cluster import MAX_RATE, gpu_memory_mb
from corral.spec import SpecError, parse_memory_mb

GROUP = "node_groups:\n  - {count: 1, gpus_per_node: 2, gpu_type: V100, gpu_memory: %s}\n"


def cluster_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "value", ["32Gi", "32GiB", "32G", "32GB", "32gi", "32 Gi", "'32Gi'", "32768Mi", "33554432Ki", "0.03125Ti", "32768"]
)
def test_gpu_memory_reads_binary_suffixes_alike(tmp_path: Path, value: str) -> None:
    spec = load_cluster(cluster_file(tmp_path, GROUP % value))
    assert spec.node_groups[0].gpu_memory_mb == 32 * 1024
    assert {g.memory_mb for g in build_nodes(spec)[0].gpus} == {32 * 1024}


@pytest.mark.parametrize("value", ["80GB", "80GiB", "80G", "1.5TB", "512MB", "512", 81920])
def test_gpu_memory_agrees_with_the_job_specs_parser(value: str | int) -> None:
    assert gpu_memory_mb(value) == parse_memory_mb(value)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("32Gx", "unknown unit 'Gx'"),
        ("lots", "got 'lots'"),
        ("-1Gi", "got '-1Gi'"),
        ("true", "got true"),
        ("[32Gi]", "got a list"),
        ("{size: 32Gi}", "got a mapping"),
        (".nan", "must be a finite size"),
        ("100KB", "'100KB' is less than 1MB"),
        ("0Gi", "'0Gi' is less than 1MB"),
    ],
)
def test_a_bad_gpu_memory_names_the_field_and_the_forms(tmp_path: Path, value: str, detail: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_cluster(cluster_file(tmp_path, GROUP % value))
    message = str(caught.value)
    assert message.startswith("node_groups[0].gpu_memory: ") and detail in message
    assert "80Gi" in message


def test_every_bad_gpu_memory_is_named(tmp_path: Path) -> None:
    text = (GROUP % "32Gi") + "  - {count: 1, gpus_per_node: 2, gpu_type: T4, gpu_memory: 1Qi}\n"
    text += "  - {count: 1, gpus_per_node: 2, gpu_type: A10, gpu_memory: big}\n"
    with pytest.raises(SpecError) as caught:
        load_cluster(cluster_file(tmp_path, text))
    assert [e.field for e in caught.value.errors] == ["node_groups[1].gpu_memory", "node_groups[2].gpu_memory"]


def test_a_bad_gpu_memory_exits_2_through_the_command(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,10,1\n")
    for value, code in (("32Gi", 0), ("32Gb!", 2)):
        cluster = cluster_file(tmp_path, GROUP % value)
        result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "-o", "json"])
        assert result.exit_code == code, result.output
    assert "--cluster: node_groups[0].gpu_memory" in " ".join(result.output.split())


@pytest.mark.parametrize("field", ["price_per_gpu_hour", "watts_busy", "watts_idle"])
def test_a_price_or_power_above_the_bound_names_the_field(tmp_path: Path, field: str) -> None:
    text = f"node_groups:\n  - {{count: 1, gpus_per_node: 1, gpu_type: V100, {field}: 1e308}}\n"
    with pytest.raises(SpecError, match=rf"node_groups\[0\]\.{field}: must be at most 1,000,000, got 1e\+308"):
        load_cluster(cluster_file(tmp_path, text))
    at_bound = text.replace("1e308", str(MAX_RATE))
    assert getattr(load_cluster(cluster_file(tmp_path, at_bound)).node_groups[0], field) == MAX_RATE


def test_cost_and_energy_stay_finite_at_the_bounds(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,3000000000,1\n")  # 95 years
    rates = "price_per_gpu_hour: 1e6, watts_busy: 1e6, watts_idle: 1e6"
    cluster = cluster_file(tmp_path, f"node_groups:\n  - {{count: 1000, gpus_per_node: 64, gpu_type: V100, {rates}}}\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "-o", "json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["policies"]["default"]
    assert all(math.isfinite(figures[k]) for k in ("cost", "busy_cost", "energy_kwh"))


@pytest.mark.parametrize("speed", ["true", "'fast'", "5000"])
def test_a_gpu_speed_that_is_not_a_speed_is_refused_naming_it(tmp_path: Path, speed: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"node_groups: [{{count: 1, gpus_per_node: 1, gpu_type: V100}}]\ngpu_speed: {{V100: {speed}}}\n")
    with pytest.raises(SpecError, match=r"gpu_speed\.V100"):
        load_cluster(path)
