import pytest

from corral.spec import SpecError
from corral.spec.resources import STORED
from corral.spec.service import REPLICA_RESTARTS, ServiceSpec, load_service_yaml, parse_service_spec

SERVICE_FILE = """\
kind: service
name: sentiment
command: python examples/model_server.py     # listens on $PORT
resources: {gpus: 0.5, cpus: 2, memory: 4GB}
replicas: {min: 0, max: 4}
readiness: {path: /ready, timeout: 2s, hold: 30s}
autoscale: {target_inflight: 4, up_delay: 2s, down_delay: 1m}
priority: 100
env: {MODEL_DIM: 64}
"""


def errors_of(data) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse_service_spec(data)
    return {e.field: e.message for e in info.value.errors}


def test_the_documented_service_file_parses():
    spec = load_service_yaml(SERVICE_FILE)
    assert spec.name == "sentiment"
    assert (spec.replicas.min, spec.replicas.max) == (0, 4)
    assert spec.readiness.path == "/ready"
    assert (spec.readiness.timeout_s, spec.readiness.hold_s) == (2.0, 30.0)
    assert spec.autoscale.target_inflight == 4 and spec.autoscale.target_rps is None
    assert (spec.autoscale.up_delay_s, spec.autoscale.down_delay_s) == (2.0, 60.0)
    assert spec.env == {"MODEL_DIM": "64"}
    assert spec.resources.memory_mb == 4096


def test_a_replica_is_a_job_with_the_services_resources_and_priority():
    spec = load_service_yaml(SERVICE_FILE)
    job = spec.replica_job(3)
    assert job.command == spec.command
    assert job.resources == spec.resources
    assert job.priority == 100
    assert job.max_restarts == REPLICA_RESTARTS
    assert job.env["CORRAL_SERVICE"] == "sentiment"
    assert job.env["CORRAL_SERVICE_REVISION"] == "3"
    assert job.env["MODEL_DIM"] == "64"
    assert job.name == "sentiment-r3"


def test_defaults_run_one_replica_probed_at_the_root():
    spec = parse_service_spec({"name": "a", "command": "serve"})
    assert (spec.replicas.min, spec.replicas.max) == (1, 1)
    assert spec.readiness.path == "/"


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"name": "Big_Name", "command": "x"}, "name", "lowercase"),
        ({"command": "x"}, "name", "required"),
        ({"name": "a", "command": ""}, "command", "must not be empty"),
        ({"name": "a", "command": 5}, "command", "a list of arguments (strings), got 5: YAML reads an unquoted"),
        ({"name": "a", "command": True}, "command", "a list of arguments (strings), got true: YAML reads an unquoted"),
        ({"name": "a", "command": "x", "replicas": {"min": 3, "max": 2}}, "replicas", "at least min"),
        (
            {"name": "a", "command": "x", "replicas": {"min": -1}},
            "replicas.min",
            "must be a whole number from 0 to 256, got -1",
        ),
        ({"name": "a", "command": "x", "readiness": {"path": "ready"}}, "readiness.path", "absolute URL path"),
        ({"name": "a", "command": "x", "readiness": {"timeout": "soon"}}, "readiness.timeout", "duration"),
        ({"name": "a", "command": "x", "autoscale": {"target_inflight": 1, "target_rps": 5}}, "autoscale", "not both"),
        (
            {"name": "a", "command": "x", "autoscale": {"target_rps": 0}},
            "autoscale.target_rps",
            "must be a number above 0, got 0",
        ),
        ({"name": "a", "command": "x", "env": {"PORT": "80"}}, "env", "must not set PORT"),
        ({"name": "a", "command": "x", "env": {"MASTER_PORT": "29500"}}, "env", "must not set MASTER_PORT"),
        ({"name": "a", "command": "x", "env": {"1X": "a"}}, "env", "bad variable name"),
        ({"name": "a", "command": "x", "replicas": {"most": 3}}, "replicas.most", "valid fields are min, max"),
        ({"name": "a", "command": "x", "resources": {"gpus": 1.5}}, "resources.gpus", "whole number"),
    ],
)
def test_errors_name_the_field_and_what_is_valid(data, field, words):
    errors = errors_of(data)
    assert field in errors, errors
    assert words in errors[field], errors[field]


def test_a_job_file_is_not_a_service():
    assert "expected 'service'" in errors_of({"kind": "job", "name": "a", "command": "x"})["kind"]


def test_a_service_may_not_set_the_variables_corral_sets():
    with pytest.raises(SpecError, match="env: MASTER_ADDR is set by Corral in every job"):
        parse_service_spec({"name": "web", "command": "serve", "env": {"MASTER_ADDR": "x"}})


def test_a_stored_service_that_set_master_port_still_loads():
    data = {"name": "web", "command": "serve", "env": {"MASTER_PORT": "29500"}}
    spec = ServiceSpec.model_validate(data, context={STORED: True})
    assert spec.env == {"MASTER_PORT": "29500"}


def test_a_number_of_replicas_is_a_fixed_count_and_other_forms_are_told_the_valid_ones():
    spec = parse_service_spec({"name": "web", "command": "serve", "replicas": 3})
    assert (spec.replicas.min, spec.replicas.max) == (3, 3)
    with pytest.raises(SpecError, match=r"replicas: expected a number of replicas such as 2, or \{min: 1, max: 4\}"):
        parse_service_spec({"name": "web", "command": "serve", "replicas": "lots"})
    with pytest.raises(SpecError, match="replicas"):
        parse_service_spec({"name": "web", "command": "serve", "replicas": -1})


def test_min_alone_above_the_default_max_runs_that_many():
    spec = parse_service_spec({"name": "web", "command": "serve", "replicas": {"min": 3}})
    assert (spec.replicas.min, spec.replicas.max) == (3, 3)
    spec = parse_service_spec({"name": "web", "command": "serve", "replicas": {"min": 0}})
    assert (spec.replicas.min, spec.replicas.max) == (0, 1)


def test_max_0_alone_stops_a_service():
    spec = parse_service_spec({"name": "web", "command": "serve", "replicas": {"max": 0}})
    assert (spec.replicas.min, spec.replicas.max) == (0, 0)
    with pytest.raises(SpecError, match=r"max \(0\) must be at least min \(2\)"):
        parse_service_spec({"name": "web", "command": "serve", "replicas": {"min": 2, "max": 0}})


def test_a_services_priority_takes_the_range_of_a_jobs():
    assert parse_service_spec({"name": "a", "command": "serve", "priority": 5000}).replica_job(1).priority == 5000
    assert "priority" in errors_of({"name": "a", "command": "serve", "priority": 1_000_001})


def test_numbers_in_a_command_list_become_text_as_in_a_job():
    spec = parse_service_spec({"name": "web", "command": ["serve", "--workers", 2, "--reload", True]})
    assert spec.command == ["serve", "--workers", "2", "--reload", "true"]


def test_a_service_command_list_and_env_keep_their_text_as_written():
    spec = load_service_yaml(
        "kind: service\nname: a\ncommand: [serve, --workers, 010, --debug, yes]\nenv: {LR: 1.50}\n"
    )
    assert spec.command == ["serve", "--workers", "010", "--debug", "yes"]
    assert spec.env == {"LR": "1.50"}
