"""Field errors are in the project's words: what the field must be, its limits, and what was given."""

from __future__ import annotations

import pytest

from corral.spec import SpecError, load_job_yaml
from corral.spec.cluster import load_cluster_yaml
from corral.spec.config import load_cluster_config_yaml
from corral.spec.service import load_service_yaml


def refusal(load, text: str) -> str:
    with pytest.raises(SpecError) as refused:
        load(text)
    return str(refused.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "resources: {gpus: -1}",
            "resources.gpus: must be a whole number from 0 to 64 or a fraction from 0.01 to below 1, got -1",
        ),
        ("resources: {gpus: 65}", "resources.gpus: must be a whole number from 0 to 64 or a fraction"),
        ("nodes: 0", "nodes: must be a whole number from 1 to 4,096, got 0"),
        ("nodes: 5000", "nodes: must be a whole number from 1 to 4,096, got 5000"),
        ("max_restarts: -1", "max_restarts: must be a whole number from 0 to 1,000, got -1"),
        ("priority: 2000000", "priority: must be a whole number from -1,000,000 to 1,000,000, got 2000000"),
        ("resources: {cpus: 0}", "resources.cpus: must be a number above 0 and at most 4,096, got 0"),
        ("grace_period: 100000", "grace_period: must be a number at most 86,400, got 100000"),
        ("grace_period: .inf", "grace_period: must be a number at most 86,400, got inf"),
        ("grace_period: .nan", "grace_period: must be a number at most 86,400, got nan"),
        ("grace_period: 1000000000", "grace_period: must be a number at most 86,400, got 1000000000"),
        ("grace_period: 2d", "grace_period: must be at most 1d (86,400 seconds), got '2d'"),
        ("grace_period: '24:00:01'", "grace_period: must be at most 1d (86,400 seconds), got '24:00:01'"),
        ("name: [a]", "name: expected text, got a list"),
        ("resources: 5", "resources: expected a mapping of fields, got 5; valid fields are gpus"),
        ("resources: true", "resources: expected a mapping of fields, got true;"),
        ("topology: [rack]", "topology: expected a mapping of fields, got a list;"),
        ("resources: {memory: true}", "resources.memory: expected a size such as 512MB, 64GB, 64Gi or 1.5TB, got true"),
        ("time_limit: false", "time_limit: expected a duration such as 90s, 30m, 2h, 1d, 1h30m or HH:MM:SS, got false"),
        ("array: true", "array: expected indices as text, such as 0-99, 1,3,5-7 or 0-99%8, got true"),
        ("after_ok: true", "after_ok: expected a job id or a list of them, such as [j-3fk2a9qz], got true"),
        (
            "resources: {gpus: 1, gpu_type: false}",
            "resources.gpu_type: expected a GPU type or a list of them, such as H100 or [H100, A100], got false",
        ),
        ("launcher: mpi", "launcher: must be 'per-gpu' or 'per-node', got 'mpi'"),
        ("preemptible: 1", "preemptible: expected true or false, got 1"),
        ("preemptible: 0", "preemptible: expected true or false, got 0"),
        ("preemptible: 'yes'", "preemptible: expected true or false, got 'yes'"),
        ("preemptible: 'true'", "preemptible: expected true or false, got 'true'"),
        ("resources: {cpus: true}", "resources.cpus: must be a number above 0 and at most 4,096, got true"),
    ],
)
def test_job_field_errors_say_what_is_valid(text, said):
    assert refusal(load_job_yaml, f"command: x\n{text}\n").startswith(said)


@pytest.mark.parametrize(("text", "said"), [("- a\n", "got a list"), ("5\n", "got 5"), ("true\n", "got true")])
def test_a_job_file_that_is_not_a_mapping_names_what_it_is(text, said):
    assert refusal(load_job_yaml, text) == f"job file must be a mapping of fields (name, command, resources, …), {said}"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "teams:",
            "teams: expected a mapping of NAME: {parent, members, quotas}, got nothing;"
            " leave it out, or write {} for none",
        ),
        ("teams: []", "teams: expected a mapping of NAME: {parent, members, quotas}, got a list"),
        (
            "teams: {a: {quotas: {H100: {nominal: 1, borrowing_limit: -1}}}}",
            "teams.a.quotas.H100.borrowing_limit: must be a number from 0 to 1,000,000, got -1",
        ),
        (
            "fair_share: {weights: {a: 0}}",
            "fair_share.weights.a: must be a number above 0 and at most 1,000,000, got 0",
        ),
        ("gpu_speed: {A: 0}", "gpu_speed.A: must be a number from 0.001 to 1,000, got 0"),
        ("teams: {a: {members: x}}", "teams.a.members: expected a list, got 'x'"),
    ],
)
def test_cluster_config_errors_say_what_is_valid(text, said):
    assert refusal(load_cluster_config_yaml, text) == said


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("replicas: {max: -1}", "replicas.max: must be a whole number from 0 to 256, got -1"),
        ("readiness: {timeout: 100}", "readiness.timeout: must be a number above 0 and at most 60, got 100"),
        ("autoscale: {target_rps: 0}", "autoscale.target_rps: must be a number above 0, got 0"),
        ("replicas: {min: true}", "replicas.min: must be a whole number from 0 to 256, got true"),
        ("replicas: {max: true}", "replicas.max: must be a whole number from 0 to 256, got true"),
        ("autoscale: {target_inflight: true}", "autoscale.target_inflight: must be a number above 0, got true"),
        ("autoscale: {target_rps: false}", "autoscale.target_rps: must be a number above 0, got false"),
        ("replicas: true", "replicas: expected a number of replicas such as 2, or {min: 1, max: 4}, got true"),
        ("replicas: [2]", "replicas: expected a number of replicas such as 2, or {min: 1, max: 4}, got [2]"),
    ],
)
def test_service_errors_say_what_is_valid(text, said):
    assert refusal(load_service_yaml, f"name: s\ncommand: x\n{text}\n") == said


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("node_groups:\n", "node_groups: expected a list, got nothing; it must hold at least 1 item"),
        ("node_groups: []\n", "node_groups: must hold at least 1 item, got none"),
    ],
)
def test_a_cluster_file_without_node_groups_is_not_told_to_leave_them_out(text, said):
    """node_groups is required and holds at least one group: neither leaving it out nor [] is a way out."""
    assert refusal(load_cluster_yaml, text) == said


def test_a_long_text_given_for_a_mapping_is_shown_by_its_start_and_length():
    """A CSV trace given as the cluster file reads as one long YAML string: the message shows its start, not
    the whole file."""
    text = "job_id,submit_time_s,duration_s,num_gpus\n\n" + "a,0,10,1\n\n" * 10_000
    said = refusal(load_cluster_yaml, text)
    assert said.startswith("cluster file must be a mapping with node_groups, got 'job_id,submit_time_s,")
    assert said.endswith("'… (90,040 characters)") and len(said) < 200  # YAML folds the blank lines
    said = refusal(load_cluster_yaml, f"node_groups: [{'x' * 500}]")
    assert said.startswith(f"node_groups[0]: expected a mapping of fields, got a str ('{'x' * 60}'… (500 characters))")


def test_a_cluster_files_slowdown_is_a_number_not_a_boolean():
    text = "node_groups: [{count: 1, gpus_per_node: 8, gpu_type: V100}]\ncross_rack_slowdown: true\n"
    assert refusal(load_cluster_yaml, text) == "cross_rack_slowdown: must be a number from 1 to 100, got true"


@pytest.mark.parametrize(("text", "said"), [("- a\n", "got a list"), ("5\n", "got 5"), ("true\n", "got true")])
def test_service_cluster_and_config_files_that_are_not_mappings_name_what_they_are_as_job_files_do(text, said):
    """The same words as a job file's: the value as YAML writes it, not Python's type name."""
    assert refusal(load_service_yaml, text) == f"service file must be a mapping of fields (name, command, …), {said}"
    assert refusal(load_cluster_yaml, text) == f"cluster file must be a mapping with node_groups, {said}"
    assert refusal(load_cluster_config_yaml, text).endswith(f"(teams, queues, ...), {said}")
