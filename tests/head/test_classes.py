"""Priority classes fill in a job's priority; a job's own priority may be anything a class may set."""

from __future__ import annotations

import pytest

from corral.head.security import Principal, Role
from corral.head.services.classes import resolve
from corral.head.services.common import Infeasible
from corral.spec import load_cluster_config_yaml, parse_job_spec

CONFIG = load_cluster_config_yaml(
    """
    priority_classes:
      huge: {value: 5000}
      high: {value: 100}
      low: {value: -1000000, preemptible: true}
    queues:
      fast: {priority_class: high}
      plain: {time_limit: 1h}
    """
)
ALICE = Principal("alice", Role.USER)


def resolved(**fields):
    return resolve(parse_job_spec({"command": "x", **fields}), ALICE, CONFIG)


def refusal(**fields) -> tuple[str, str]:
    with pytest.raises(Infeasible) as refused:
        resolved(**fields)
    return refused.value.field, str(refused.value)


@pytest.mark.parametrize(
    ("fields", "priority"),
    [
        ({"priority_class": "huge"}, 5000),
        ({"priority_class": "huge", "priority": 5000}, 5000),  # the class's own value, given twice
        ({"priority_class": "high", "priority": 100}, 100),
        ({"priority_class": "low", "priority": -1000000}, -1000000),
        ({"queue": "fast", "priority": 100}, 100),
        ({"priority": 999999}, 999999),  # no class: the job's own priority, over the whole range
    ],
)
def test_a_priority_equal_to_the_class_value_is_accepted_over_the_whole_range(fields, priority):
    assert resolved(**fields).priority == priority


def test_a_priority_that_differs_from_the_named_class_says_so():
    assert refusal(priority_class="high", priority=5) == (
        "priority",
        "priority 5 differs from priority_class high's value 100: give one of them",
    )


def test_a_priority_that_differs_from_a_queues_class_names_the_queue():
    field, message = refusal(queue="fast", priority=7)
    assert field == "priority"
    assert message == (
        "priority 7 differs from the value 100 of priority class high, which this job gets from queue fast:"
        " leave priority out, or give priority_class: NAME instead (classes: high (100), huge (5000), low (-1000000))"
    )


def test_a_priority_that_differs_from_the_default_class_names_the_default():
    config = CONFIG.model_copy(update={"default_priority_class": "low"})
    with pytest.raises(Infeasible) as refused:
        resolve(parse_job_spec({"command": "x", "queue": "plain", "priority": 7}), ALICE, config)
    assert str(refused.value).startswith(
        "priority 7 differs from the value -1000000 of priority class low, which this job gets from the cluster's"
        " default_priority_class: leave priority out"
    )


def test_a_queue_without_a_class_leaves_the_jobs_own_priority():
    assert resolved(queue="plain", priority=7).priority == 7
