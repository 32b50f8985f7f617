"""Fuzzing job files: whatever the document, the parser answers a JobSpec or a SpecError naming fields.

Never another exception; and through the CLI, exit 2 with the field named.
"""

import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.cli.main import main
from corral.spec import JobSpec, SpecError, load_job_yaml, parse_job_spec

FIELDS = [
    "name",
    "command",
    "nodes",
    "resources",
    "launcher",
    "topology",
    "team",
    "priority",
    "priority_class",
    "queue",
    "time_limit",
    "max_restarts",
    "preemptible",
    "grace_period",
    "env",
    "array",
    "after_ok",
    "after_any",
    "workdir",
    "kind",
]
RESOURCE_FIELDS = ["gpus", "gpu_type", "cpus", "memory"]
VALID = {
    "name": "train",
    "command": ["python", "train.py", "--epochs", 3],
    "nodes": 2,
    "resources": {"gpus": 4, "gpu_type": ["H100", "A100"], "cpus": 16, "memory": "64GB"},
    "launcher": "per-gpu",
    "topology": {"pack": "rack"},
    "team": "vision",
    "priority": 5,
    "time_limit": "2h",
    "max_restarts": 2,
    "preemptible": True,
    "grace_period": "30s",
    "env": {"EPOCHS": 3, "DEBUG": True},
    "array": "0-9%2",
    "after_ok": ["j-3fk2a9qz"],
    "workdir": "/data/run",
}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["", "0", "-1", "1e400", "nan", "8xH100:80GB", "2h", "64GB", "per-gpu", "\x00", "é" * 70])
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10) | st.sampled_from(FIELDS), inner),
    max_leaves=12,
)
keys = st.sampled_from(FIELDS) | st.text(max_size=12)
documents = st.dictionaries(keys, values, max_size=8)


def check(document):
    """The parser's contract on one decoded document."""
    try:
        spec = parse_job_spec(document)
    except SpecError as exc:
        assert exc.errors, "a SpecError must list at least one problem"
        for error in exc.errors:
            assert error.message
            if isinstance(document, dict) and document:
                assert error.field, f"no field path in {error} for {document!r}"
        return None
    assert isinstance(spec, JobSpec)
    return spec


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_arbitrary_documents_give_a_spec_or_field_errors(document):
    check(document)


@settings(max_examples=150, deadline=None)
@given(values)
def test_documents_that_are_not_mappings_are_refused_clearly(document):
    if not isinstance(document, dict):
        try:
            parse_job_spec(document)
        except SpecError as exc:
            assert "must be a mapping" in str(exc)
        else:
            raise AssertionError("a non-mapping document was accepted")


@settings(max_examples=250, deadline=None)
@given(st.sampled_from([*VALID, "resources.gpus", "resources.gpu_type", "resources.memory", "resources.cpus"]), values)
def test_a_valid_spec_with_one_field_mutated_is_accepted_or_names_that_field(path, value):
    document = json.loads(json.dumps(VALID))
    target, _, inner = path.partition(".")
    if inner:
        document[target][inner] = value
    else:
        document[target] = value
    try:
        parse_job_spec(document)
    except SpecError as exc:
        fields = {error.field for error in exc.errors}
        assert all(f == target or f.startswith((f"{target}.", f"{target}[")) for f in fields), (path, fields)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes_the_yaml_loader(text):
    try:
        load_job_yaml(text)
    except SpecError as exc:
        assert exc.errors


@settings(max_examples=200, deadline=None)
@given(documents)
def test_yaml_round_trip_behaves_like_the_document(document):
    try:
        text = yaml.safe_dump(document, allow_unicode=True)
    except yaml.YAMLError:
        return
    try:
        load_job_yaml(text)
    except SpecError as exc:
        assert exc.errors


def test_the_valid_spec_is_valid():
    assert check(VALID) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(set(VALID) - {"name", "workdir", "preemptible"})), st.sampled_from([[], {}, -5, "??"]))
def test_the_cli_exits_2_naming_the_field(tmp_path, monkeypatch, capsys, field, bad):
    monkeypatch.setenv("CORRAL_HEAD", "http://127.0.0.1:9")  # never reached: validation comes first
    document = {**VALID, field: bad}
    try:
        parse_job_spec(document)
    except SpecError:
        pass
    else:
        return  # this value happens to be valid for this field
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(document))
    capsys.readouterr()
    try:
        main(["submit", str(path)])
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    err = capsys.readouterr().err
    assert code == 2, err
    assert field in err, err
