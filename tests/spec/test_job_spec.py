import pytest

from corral.spec import FieldError, JobSpec, SpecError, load_job_yaml, parse_job_spec
from corral.spec.cluster import load_cluster_yaml
from corral.spec.config import load_cluster_config_yaml
from corral.spec.service import load_service_yaml

JOB_FILE = """\
name: finetune
command: python train.py --epochs 3      # string (run by a shell) or list
nodes: 2                                 # gang: all nodes start together or none
resources:
  gpus: 8                                # per node; a fraction such as 0.5 shares one GPU
  gpu_type: [H100, A100]                 # acceptable types, preferred first
  cpus: 16
  memory: 64GB
launcher: per-gpu
team: research
priority: 10
time_limit: 2h
max_restarts: 3
env: {HF_HOME: /data/hf}
"""


def errors_of(data) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse_job_spec(data)
    return {e.field: e.message for e in info.value.errors}


def the_error(data) -> FieldError:
    with pytest.raises(SpecError) as info:
        parse_job_spec(data)
    assert len(info.value.errors) == 1, info.value.errors
    return info.value.errors[0]


def test_the_documented_job_file_parses():
    spec = load_job_yaml(JOB_FILE)
    assert spec.name == "finetune"
    assert spec.command == "python train.py --epochs 3"
    assert spec.nodes == 2
    assert spec.resources.gpus == 8
    assert spec.resources.gpu_type == ["H100", "A100"]
    assert spec.resources.cpus == 16
    assert spec.resources.memory_mb == 64 * 1024
    assert spec.launcher == "per-gpu"
    assert spec.team == "research"
    assert spec.priority == 10
    assert spec.time_limit_s == 7200
    assert spec.max_restarts == 3
    assert spec.env == {"HF_HOME": "/data/hf"}


def test_defaults_for_a_minimal_job():
    spec = parse_job_spec({"command": "python train.py"})
    assert spec.nodes == 1
    assert spec.resources.gpus == 0
    assert spec.resources.gpu_type == []
    assert spec.launcher == "per-node"
    assert spec.priority == 0
    assert spec.max_restarts == 0
    assert spec.time_limit_s is None
    assert spec.env == {}
    assert spec.display_name == "python"


@pytest.mark.parametrize(
    ("command", "name"),
    [("/usr/bin/python3 -m x", "python3"), (["./run.sh", "--fast"], "run.sh"), ("'$weird' arg", "weird")],
)
def test_display_name_defaults_to_the_commands_first_word(command, name):
    assert parse_job_spec({"command": command}).display_name == name


def test_kind_job_is_accepted_and_dropped():
    assert parse_job_spec({"kind": "job", "command": "x"}).command == "x"


def test_kind_service_is_refused_for_jobs():
    error = the_error({"kind": "service", "command": "x"})
    assert error.field == "kind"
    assert "expected 'job'" in error.message
    assert "'service'" in error.message


def test_command_is_required():
    error = the_error({"name": "x"})
    assert error.field == "command"
    assert "required" in error.message.lower()


@pytest.mark.parametrize("command", ["", "   ", []])
def test_empty_command_is_refused(command):
    error = the_error({"command": command})
    assert error.field == "command"
    assert "must not be empty" in error.message


def test_command_of_the_wrong_type_names_the_field_once():
    error = the_error({"command": {"run": "x"}})
    assert error.field == "command"


def test_argv_command_is_kept_as_a_list():
    assert parse_job_spec({"command": ["python", "-c", "print(1)"]}).command == ["python", "-c", "print(1)"]


def test_unknown_top_level_field_lists_the_valid_fields():
    error = the_error({"command": "x", "gpus": 1})
    assert error.field == "gpus"
    assert error.message.startswith("unknown field; valid fields are ")
    for name in ("name", "command", "nodes", "resources", "launcher", "team", "priority", "time_limit", "env"):
        assert name in error.message
    assert "time_limit_s" not in error.message  # users write the alias


def test_unknown_resources_field_lists_the_resources_fields():
    error = the_error({"command": "x", "resources": {"gpu": 1}})
    assert error.field == "resources.gpu"
    assert error.message == "unknown field; valid fields are gpus, gpu_type, cpus, memory"


@pytest.mark.parametrize("gpus", [0, 0.25, 0.5, 1, 2, 8, 2.0])
def test_whole_gpus_or_a_fraction_below_one(gpus):
    assert parse_job_spec({"command": "x", "resources": {"gpus": gpus}}).resources.gpus == gpus


def test_fractional_gpu_occupies_one_slot():
    spec = parse_job_spec({"command": "x", "resources": {"gpus": 0.5}})
    assert spec.gpus_per_node == 0.5
    assert spec.whole_gpus_per_node == 1


@pytest.mark.parametrize("gpus", [1.5, 2.25])
def test_fractions_above_one_are_refused(gpus):
    error = the_error({"command": "x", "resources": {"gpus": gpus}})
    assert error.field == "resources.gpus"
    assert "whole number from 0 to 64 or a fraction from 0.01 to below 1" in error.message
    assert str(gpus) in error.message


@pytest.mark.parametrize("gpus", [1e-9, 0.001, 0.0099])
def test_fractions_below_one_percent_are_refused(gpus):
    error = the_error({"command": "x", "resources": {"gpus": gpus}})
    assert error.field == "resources.gpus"
    assert error.message == (f"must be a whole number from 0 to 64 or a fraction from 0.01 to below 1, got {gpus}")


@pytest.mark.parametrize("gpus", [0.01, 0.015, 0.99])
def test_a_fraction_of_one_percent_or_more_is_accepted(gpus):
    assert parse_job_spec({"command": "x", "resources": {"gpus": gpus}}).resources.gpus == gpus


@pytest.mark.parametrize("gpus", [-1, 65, "two"])
def test_out_of_range_gpus_name_the_field(gpus):
    assert the_error({"command": "x", "resources": {"gpus": gpus}}).field == "resources.gpus"


@pytest.mark.parametrize(
    ("value", "types"),
    [("H100", ["H100"]), ("H100, A100", ["H100", "A100"]), (["L4", "A100"], ["L4", "A100"]), (None, [])],
)
def test_gpu_type_is_a_string_or_a_list(value, types):
    spec = parse_job_spec({"command": "x", "resources": {"gpus": 1, "gpu_type": value}})
    assert spec.resources.gpu_type == types


def test_a_gpu_type_without_gpus_is_refused():
    error = the_error({"command": "x", "resources": {"gpu_type": "H200"}})
    assert error.field == "resources"
    assert "gpu_type H200 is given, but gpus is 0" in error.message and "leave gpu_type out" in error.message


def test_a_stored_service_accepted_before_that_rule_still_loads():
    from corral.spec.resources import STORED
    from corral.spec.service import ServiceSpec

    stored = {"name": "web", "command": "serve", "resources": {"gpu_type": ["H100"]}}
    assert ServiceSpec.model_validate(stored, context={STORED: True}).resources.gpu_type == ["H100"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["H100", "A100", "H100"], "lists H100 twice: give each type once"),
        ("L4,L4", "lists L4 twice"),
        ("H 100", "bad GPU type 'H 100'"),
        (["A100", "-x"], "'-x'"),
    ],
)
def test_bad_gpu_types_name_the_field(value, expected):
    error = the_error({"command": "x", "resources": {"gpu_type": value}})
    assert error.field == "resources.gpu_type"
    assert expected in error.message


def test_memory_and_time_limit_take_quantities():
    spec = parse_job_spec({"command": "x", "resources": {"memory": "1.5TB"}, "time_limit": "1h30m"})
    assert spec.resources.memory_mb == 1536 * 1024
    assert spec.time_limit_s == 5400


def test_bad_memory_names_the_field_and_the_format():
    error = the_error({"command": "x", "resources": {"memory": "lots"}})
    assert error.field == "resources.memory"
    assert "expected a size such as 512MB, 64GB, 64Gi or 1.5TB" in error.message


def test_bad_time_limit_names_the_field_and_the_format():
    error = the_error({"command": "x", "time_limit": "soon"})
    assert error.field == "time_limit"
    assert "expected a duration such as" in error.message


def test_bad_launcher_lists_the_launchers():
    error = the_error({"command": "x", "launcher": "mpi"})
    assert error.field == "launcher"
    assert "per-gpu" in error.message
    assert "per-node" in error.message


def test_env_values_are_coerced_to_strings():
    spec = parse_job_spec({"command": "x", "env": {"EPOCHS": 3, "LR": 0.5, "DEBUG": True, "OFF": False, "S": "s"}})
    assert spec.env == {"EPOCHS": "3", "LR": "0.5", "DEBUG": "true", "OFF": "false", "S": "s"}


def test_env_values_from_yaml_are_strings_as_written():
    spec = load_job_yaml("command: x\nenv:\n  EPOCHS: 3\n  VERBOSE: yes\n  RUN: 010\n  LR: 1.50\n  DAY: 2026-01-01\n")
    assert spec.env == {"EPOCHS": "3", "VERBOSE": "yes", "RUN": "010", "LR": "1.50", "DAY": "2026-01-01"}


def test_env_values_merged_in_with_yaml_merge_keys_are_strings_as_written_too():
    spec = load_job_yaml("command: x\nenv:\n  <<: [{RUN: 010}, {DEBUG: yes}]\n  LR: 1.50\n")
    assert spec.env == {"RUN": "010", "DEBUG": "yes", "LR": "1.50"}


def test_an_env_variable_without_a_value_in_yaml_is_still_refused():
    with pytest.raises(SpecError, match='env: E has no value; write E: "" for an empty string'):
        load_job_yaml("command: x\nenv: {E: }\n")


@pytest.mark.parametrize("key", ["1X", "A-B", "A B", ""])
def test_bad_env_names_are_refused(key):
    error = the_error({"command": "x", "env": {key: "v"}})
    assert error.field == "env"
    assert f"bad variable name {key!r}" in error.message
    assert "letters, digits and '_'" in error.message


def test_env_must_be_a_mapping():
    assert the_error({"command": "x", "env": "A=1"}).field == "env"


@pytest.mark.parametrize(("field", "value"), [("name", "has space"), ("name", "-lead"), ("team", "a/b")])
def test_bad_names_say_what_is_allowed(field, value):
    error = the_error({"command": "x", field: value})
    assert error.field == field
    assert repr(value) in error.message
    assert "letters, digits" in error.message


def test_every_problem_is_reported_at_once():
    errors = errors_of({"command": "x", "nodes": 0, "priority": 5_000_000, "resources": {"gpus": 1.5, "cpus": 0}})
    assert set(errors) == {"nodes", "priority", "resources.gpus", "resources.cpus"}


def test_spec_error_message_joins_field_messages():
    with pytest.raises(SpecError) as info:
        parse_job_spec({"command": "x", "nodes": 0})
    assert str(info.value).startswith("nodes: ")
    assert isinstance(info.value, ValueError)


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(SpecError) as info:
        load_job_yaml("name: x\ncommand: [a, b\nnodes: 2\n", source="train.yaml")
    message = str(info.value)
    assert message.startswith("train.yaml is not valid YAML at line 3")
    assert "column" in message


def test_yaml_indentation_error_names_the_line():
    with pytest.raises(SpecError, match=r"not valid YAML at line 2"):
        load_job_yaml("name: x\n  command: a\n")


@pytest.mark.parametrize(("text", "kind"), [("", "empty"), ("- a\n- b\n", "a list"), ("just words", "'just words'")])
def test_a_job_file_must_be_a_mapping(text, kind):
    with pytest.raises(SpecError) as info:
        load_job_yaml(text)
    assert "must be a mapping of fields" in str(info.value)
    assert str(info.value).endswith(f"got {kind}")


def test_specs_are_frozen():
    spec = parse_job_spec({"command": "x"})
    with pytest.raises(ValueError):
        spec.nodes = 3  # type: ignore[misc]


def test_round_trip_through_json_keeps_the_spec():
    spec = load_job_yaml(JOB_FILE)
    dumped = spec.model_dump(mode="json", by_alias=True)
    assert JobSpec.model_validate(dumped) == spec


def test_an_env_variable_without_a_value_is_refused():
    with pytest.raises(SpecError) as caught:
        load_job_yaml("command: x\nenv: {FOO: }")
    assert str(caught.value) == 'env: FOO has no value; write FOO: "" for an empty string'


def test_an_env_value_must_be_a_scalar():
    with pytest.raises(SpecError, match="env: FOO must be a string, number or boolean, not a list"):
        load_job_yaml("command: x\nenv: {FOO: [1, 2]}")


def test_an_env_value_tagged_as_bytes_or_a_date_is_refused_with_a_hint():
    with pytest.raises(SpecError, match=r"env: DAY must be a string, number or boolean, not a date \(quote"):
        load_job_yaml("command: x\nenv: {DAY: !!timestamp 2024-01-01}")
    with pytest.raises(SpecError, match="not a bytes"):
        load_job_yaml("command: x\nenv: {BLOB: !!binary aGVsbG8=}")
    assert load_job_yaml("command: x\nenv: {DAY: 2024-01-01}").env == {"DAY": "2024-01-01"}


@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "RANK", "MASTER_ADDR", "CORRAL_JOB_ID", "CORRAL_ANYTHING"])
def test_variables_corral_sets_are_refused_in_env(name):
    with pytest.raises(SpecError, match=f"env: {name} is set by Corral in every job"):
        load_job_yaml(f"command: x\nenv: {{{name}: '1'}}")


def test_a_job_may_fix_its_rendezvous_port():
    assert load_job_yaml("command: x\nenv: {MASTER_PORT: 29500}").env == {"MASTER_PORT": "29500"}
    for bad in ("notaport", "0", "99999", "-1"):
        with pytest.raises(SpecError, match=f"env: MASTER_PORT must be a port number from 1 to 65535, got '{bad}'"):
            load_job_yaml(f"command: x\nenv: {{MASTER_PORT: '{bad}'}}")


@pytest.mark.parametrize("priority", [5000, -1_000_000, 1_000_000])
def test_a_job_priority_takes_any_value_a_priority_class_may_have(priority):
    config = load_cluster_config_yaml(f"priority_classes: {{huge: {{value: {priority}}}}}")
    assert config.priority_classes["huge"].value == priority
    assert load_job_yaml(f"command: x\npriority_class: huge\npriority: {priority}").priority == priority


@pytest.mark.parametrize("priority", [1_000_001, -1_000_001])
def test_a_priority_past_what_a_class_may_have_is_refused_in_both(priority):
    rule = f"must be a whole number from -1,000,000 to 1,000,000, got {priority}"
    with pytest.raises(SpecError) as job:
        load_job_yaml(f"command: x\npriority: {priority}")
    with pytest.raises(SpecError) as config:
        load_cluster_config_yaml(f"priority_classes: {{huge: {{value: {priority}}}}}")
    assert (str(job.value), str(config.value)) == (f"priority: {rule}", f"priority_classes.huge.value: {rule}")


@pytest.mark.parametrize("field", ["nodes", "priority", "max_restarts"])
def test_whole_number_fields_refuse_booleans(field):
    with pytest.raises(SpecError, match=f"{field}: must be a whole number, not true"):
        load_job_yaml(f"command: x\n{field}: true")


@pytest.mark.parametrize("memory", ["500K", "0.5MB", "100KiB"])
def test_memory_under_a_megabyte_is_refused(memory):
    with pytest.raises(SpecError, match=r"resources\.memory: .* is less than 1MB"):
        load_job_yaml(f"command: x\nresources: {{memory: {memory}}}")


def test_gpus_must_be_a_number_not_a_boolean():
    with pytest.raises(SpecError, match=r"resources\.gpus: must be a whole number from 0 to 64 .*, not true"):
        load_job_yaml("command: x\nresources: {gpus: true}")


@pytest.mark.parametrize(("text", "got"), [("5", "5"), ("010", "8"), ("1.5", "1.5"), ("true", "true"), ("yes", "true")])
def test_a_command_that_yaml_reads_as_a_number_or_boolean_is_refused(text, got):
    """YAML has read it as a value, whose text may not be what was written (010 is 8, yes is true)."""
    with pytest.raises(SpecError) as refused:
        load_job_yaml(f"command: {text}")
    assert str(refused.value).startswith(
        f"command: must be a shell command line (a string) or a list of arguments (strings), got {got}: "
    )
    assert "quote the command to run it as written" in str(refused.value)
    assert load_job_yaml(f"command: '{text}'").command == text


def test_yaml_scalars_in_a_command_list_become_strings():
    assert load_job_yaml("command: [python, train.py, --epochs, 3]").command == [
        "python",
        "train.py",
        "--epochs",
        "3",
    ]


def test_a_command_list_keeps_its_arguments_as_written():
    """YAML would read 010 as 8, yes and on as true, 1.50 as 1.5 and a date as a date: the job runs what was
    written, not those values written back."""
    text = "command: [run, 010, yes, on, 1.50, .inf, 2026-01-01, 0x1F, '010']\n"
    assert load_job_yaml(text).command == ["run", "010", "yes", "on", "1.50", ".inf", "2026-01-01", "0x1F", "010"]


@pytest.mark.parametrize(
    ("text", "where", "key"),
    [
        ("name: a\ncommand: a\ncommand: b\n", "line 3, column 1", "'command' is given twice (first on line 2)"),
        ("command: x\nresources: {gpus: 1, gpus: 2}\n", "line 2, column 22", "'gpus' is given twice (first on line 2)"),
    ],
)
def test_a_key_given_twice_is_refused_not_silently_overwritten(text, where, key):
    with pytest.raises(SpecError) as refused:
        load_job_yaml(text, "train.yaml")
    message = str(refused.value)
    assert f"train.yaml is not valid YAML at {where}" in message and key in message


def test_keys_merged_in_may_still_be_overridden():
    spec = load_job_yaml("command: x\nenv:\n  <<: {A: '1', B: '2'}\n  A: '3'\n")
    assert spec.env == {"A": "3", "B": "2"}


@pytest.mark.parametrize(
    ("text", "field", "hint"),
    [
        ("command: x\narray: 3.5\n", "array", "such as 0-99, 1,3,5-7 or 0-99%8, got 3.5"),
        ("command: x\narray: [1, 2]\n", "array", "such as 0-99, 1,3,5-7 or 0-99%8, got [1, 2]"),
        ("command: x\nafter_any: 5\n", "after_any", "a job id or a list of them, such as [j-3fk2a9qz], got 5"),
        ("command: x\nresources: {gpu_type: 5}\n", "resources.gpu_type", "such as H100 or [H100, A100], got 5"),
    ],
)
def test_a_value_of_the_wrong_kind_is_told_the_form_that_is_valid(text, field, hint):
    with pytest.raises(SpecError) as refused:
        load_job_yaml(text)
    assert str(refused.value).startswith(f"{field}: expected ")
    assert hint in str(refused.value)


def test_one_dependency_may_be_given_without_a_list():
    assert load_job_yaml("command: x\nafter_ok: j-3fk2a9qz\n").after_ok == ["j-3fk2a9qz"]


def test_an_array_of_one_index_may_be_a_number():
    assert load_job_yaml("command: x\narray: 5").array == "5"
    with pytest.raises(SpecError, match="array: expected indices as text"):
        load_job_yaml("command: x\narray: [1, 2]")


@pytest.mark.parametrize(
    ("load", "prefix"),
    [
        (load_job_yaml, "name: a\ncommand: x\nenv: "),
        (load_service_yaml, "kind: service\nname: x\ncommand: "),
        (load_cluster_yaml, "node_groups: "),
        (load_cluster_config_yaml, "teams: "),
    ],
)
def test_a_document_nested_too_deeply_is_an_invalid_spec_not_a_crash(load, prefix):
    with pytest.raises(SpecError, match=r"deep\.yaml nests lists or mappings too deeply to read"):
        load(prefix + "[" * 3000 + "]" * 3000 + "\n", source="deep.yaml")


@pytest.mark.parametrize(
    ("spec", "field", "said"),
    [
        ({"command": "true #" + "x" * 200_000}, "command", "the command line is 200,006 bytes"),
        ({"command": ["echo", "y" * 140_000]}, "command", "argument 1 is 140,000 bytes"),
        ({"command": ["echo"] + ["y" * 100_000] * 12}, "command", "the arguments come to 1,200,004 bytes"),
        ({"command": "x", "env": {"BIG": "b" * 140_000}}, "env", "BIG is 140,004 bytes"),
        ({"command": "x", "env": {f"V{i}": "z" * 100 for i in range(20_000)}}, "env", "the variables come to"),
    ],
)
def test_a_command_or_environment_exec_would_refuse_is_an_invalid_spec(spec, field, said):
    with pytest.raises(SpecError) as info:
        parse_job_spec(spec)
    assert str(info.value).startswith(f"{field}: {said}")


def test_a_large_command_within_what_exec_takes_is_accepted():
    assert parse_job_spec({"command": "x" * 100_000, "env": {"A": "b" * 100_000}}).command == "x" * 100_000


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"resources": None}, "resources: expected a mapping of fields, got nothing; valid fields are gpus, gpu_type"),
        ({"topology": "rack"}, "topology: expected a mapping of fields, got a str ('rack'); valid fields are pack"),
        ({"priority": 1e30}, "priority: must be a whole number from -1,000,000 to 1,000,000, got 1e+30"),
        ({"priority": "1e30"}, "priority: must be a whole number from -1,000,000 to 1,000,000, got '1e30'"),
        ({"priority": 1_000_001}, "priority: must be a whole number from -1,000,000 to 1,000,000, got 1000001"),
    ],
)
def test_errors_name_no_internal_class_and_give_what_is_valid(spec, said):
    with pytest.raises(SpecError) as info:
        parse_job_spec({"command": "x", **spec})
    assert str(info.value).startswith(said)
    assert "Spec" not in str(info.value)


@pytest.mark.parametrize("memory", ["0", "0.0"])
def test_zero_memory_is_refused_naming_the_field(memory):
    with pytest.raises(SpecError, match=r"resources\.memory: is 0: give at least 1MB"):
        load_job_yaml(f"command: x\nresources: {{memory: {memory}}}")


def test_zero_memory_accepted_before_still_loads_from_storage():
    from corral.spec.resources import STORED, ResourcesSpec

    assert ResourcesSpec.model_validate({"memory": 0}, context={STORED: True}).memory_mb == 0


def test_a_dependency_listed_twice_is_named():
    with pytest.raises(SpecError, match=r"after_ok: lists j-a1 twice: give each job once"):
        load_job_yaml("command: x\nafter_ok: [j-a1, j-b2, j-a1]\n")


@pytest.mark.parametrize("text", ["\x1f", "command: x\x07\n", "env: {A: \x00}\n"])
def test_a_character_yaml_does_not_read_is_a_spec_error(text):
    with pytest.raises(SpecError, match="job file is not valid YAML"):
        load_job_yaml(text)
