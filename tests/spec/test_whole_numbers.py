"""Whole-number fields of job and service files read numbers one way: a whole number written with an
exponent (1e3, which YAML 1.1 reads as text), or as text that reads as one ("5"), counts; a fraction is
refused naming the field."""

from __future__ import annotations

import pytest

from corral.spec import SpecError, load_job_yaml
from corral.spec.service import load_service_yaml


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("priority: 1e3", "priority", 1000),
        ("priority: -2e3", "priority", -2000),
        ('priority: "5"', "priority", 5),
        ('priority: "1e3"', "priority", 1000),
        ("nodes: 1e0", "nodes", 1),
        ("nodes: 2E0", "nodes", 2),
        ('nodes: "2"', "nodes", 2),
        ("nodes: 2.0", "nodes", 2),
        ("max_restarts: 1e0", "max_restarts", 1),
        ('max_restarts: "3"', "max_restarts", 3),
    ],
)
def test_a_whole_number_with_an_exponent_or_as_text_is_read(line, field, value):
    spec = load_job_yaml(f"command: x\n{line}\n")
    assert getattr(spec, field) == value
    assert type(getattr(spec, field)) is int


@pytest.mark.parametrize(
    ("line", "field", "valid", "got"),
    [
        ("nodes: 1.5", "nodes", "from 1 to 4,096", "1.5"),
        ('nodes: "1.5"', "nodes", "from 1 to 4,096", "'1.5'"),
        ("max_restarts: 2.5e0", "max_restarts", "from 0 to 1,000", "'2.5e0'"),
        ("priority: 0.5", "priority", "from -1,000,000 to 1,000,000", "0.5"),
    ],
)
def test_a_fraction_is_refused_naming_the_field_and_a_whole_number(line, field, valid, got):
    with pytest.raises(SpecError) as refused:
        load_job_yaml(f"command: x\n{line}\n")
    assert str(refused.value) == f"{field}: must be a whole number {valid}, got {got}"


def test_service_whole_numbers_follow_the_same_rule():
    spec = load_service_yaml('name: s\ncommand: x\npriority: 1e2\nreplicas: {min: 1e0, max: "3"}\n')
    assert (spec.priority, spec.replicas.min, spec.replicas.max) == (100, 1, 3)
    assert load_service_yaml("name: s\ncommand: x\nreplicas: 2e0\n").replicas.max == 2
    with pytest.raises(SpecError) as refused:
        load_service_yaml("name: s\ncommand: x\nreplicas: {max: 1.5}\n")
    assert str(refused.value) == "replicas.max: must be a whole number from 0 to 256, got 1.5"
