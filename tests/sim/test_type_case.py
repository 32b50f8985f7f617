"""GPU types in the cluster file match whatever their case, and an empty type name is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.spec import SpecError
from corral.spec.cluster import load_cluster_yaml
from corral.spec.config import load_cluster_config_yaml

TWO_SPELLINGS = (
    "node_groups:\n"
    "  - {count: 1, gpus_per_node: 4, gpu_type: V100}\n"
    "  - {count: 1, gpus_per_node: 8, gpu_type: v100}\n"
    "gpu_speed: {v100: 2}\n"
)


def test_groups_whose_types_differ_only_in_case_are_one_type() -> None:
    spec = load_cluster_yaml(TWO_SPELLINGS)
    assert [g.gpu_type for g in spec.node_groups] == ["V100", "V100"]
    assert [g.group_name for g in spec.node_groups] == ["v100", "v100-2"]
    assert spec.gpu_speed == {"V100": 2.0}


def test_a_job_of_either_spelling_runs_on_both_groups(tmp_path: Path) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(TWO_SPELLINGS)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_type\na,0,10,8,V100\nb,0,10,4,v100\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(cluster), "-o", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["policies"]["default"]
    assert report["jobs"] == 2
    assert json.loads(result.output)["skipped_jobs"] == 0


@pytest.mark.parametrize("key", ['""', '" "'])
def test_an_empty_gpu_speed_type_is_refused_in_the_cluster_file_and_the_config(key: str) -> None:
    for load, text in (
        (
            load_cluster_yaml,
            f"node_groups: [{{count: 1, gpus_per_node: 4, gpu_type: V100}}]\ngpu_speed: {{{key}: 1}}\n",
        ),
        (load_cluster_config_yaml, f"gpu_speed: {{{key}: 1}}\n"),
    ):
        with pytest.raises(SpecError) as refused:
            load(text)
        assert str(refused.value).startswith("gpu_speed: has an empty GPU type name"), refused.value
