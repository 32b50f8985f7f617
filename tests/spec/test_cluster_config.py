"""The cluster config file: valid documents load; every problem names the path of the bad field."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from corral.spec import SpecError, load_cluster_config_yaml

GOOD = """
organisation: acme
teams:
  research: {}
  vision: {parent: research, members: [alice], quotas: {H100: {nominal: 16, borrowing_limit: 8, lending_limit: 4}}}
priority_classes:
  prod: {value: 100}
  spot: {value: -10, preemptible: true}
default_priority_class: spot
queues:
  debug: {time_limit: 30m, priority_class: prod}
fair_share: {half_life: 3d, weights: {vision: 2}}
"""


def test_a_parent_named_as_the_organisation_is_no_parent():
    config = load_cluster_config_yaml("organisation: acme\nteams: {research: {parent: acme}, nlp: {parent: research}}")
    assert (config.teams["research"].parent, config.teams["nlp"].parent) == (None, "research")
    assert config.ancestors("nlp") == ["research", "acme"]


def test_members_take_every_name_a_user_can_have():
    """`corral user add` takes names with '@' and of 64 characters; the config can list them as members."""
    long_name = "u" * 64
    config = load_cluster_config_yaml(f"teams: {{a: {{members: [ann@corp.io, {long_name}]}}}}")
    assert (config.team_of("ann@corp.io"), config.team_of(long_name)) == ("a", "a")


def test_a_full_config_loads():
    config = load_cluster_config_yaml(GOOD)
    assert config.team_of("alice") == "vision"
    assert config.ancestors("vision") == ["research", "acme"]
    assert config.teams["vision"].quotas["H100"].lending_limit == 4
    assert config.queues["debug"].time_limit_s == 1800
    assert config.fair_share.half_life_s == 3 * 86400


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("teams: {a: {parent: b}}", "teams.a.parent", "unknown team 'b'"),
        ("teams: {a: {quotas: {'': {nominal: 2}}}}", "teams.a.quotas", "GPU type '': give a type name such as H100"),
        ("teams: {a: {members: [x]}, b: {members: [x]}}", "teams.b.members[0]", "x is already in team a"),
        ("teams: {a: {quotas: {'H 100': {nominal: 2}}}}", "teams.a.quotas", "bad GPU type 'H 100'"),
        ("gpu_speed: {'H100!': 2}", "gpu_speed", "bad GPU type 'H100!'"),
        ("teams: {a: {members: [-x]}}", "teams.a.members", "bad user name '-x': use 1-64 characters"),
        ("teams: {a: {quotas: {H100: {nominal: 2, lending_limit: 3}}}}", "teams.a.quotas.H100.lending_limit", "exceed"),
        (
            "teams: {a: {quotas: {H100: {nominal: -1}}}}",
            "teams.a.quotas.H100.nominal",
            "must be a number from 0 to 1,000,000, got -1",
        ),
        ("default_priority_class: gold", "default_priority_class", "unknown priority class 'gold'"),
        ("queues: {q: {priority_class: gold}}", "queues.q.priority_class", "unknown priority class 'gold'"),
        ("fair_share: {weights: {ghost: 1}}", "fair_share.weights.ghost", "unknown team 'ghost'"),
        ("fair_share: {half_life: soon}", "fair_share.half_life", "expected a duration"),
        ("teams: {a: {paren: b}}", "teams.a.paren", "unknown field"),
        ("teams: {a: {parent: b}, b: {parent: a}}", "teams.a.parent", "loops back"),
        (
            "teams: {g: {quotas: {H100: {nominal: 8}}}, a: {parent: g, quotas: {H100: {nominal: 6}}},"
            " b: {parent: g, quotas: {H100: {nominal: 4}}}}",
            "teams.g.quotas.H100.nominal",
            "must hold its child teams' nominal quotas (a 6 + b 4 = 10), got 8",
        ),
        (
            "teams: {g: {quotas: {H100: {nominal: 8}}}, mid: {parent: g},"
            " a: {parent: mid, quotas: {H100: {nominal: 9}}}}",
            "teams.g.quotas.H100.nominal",
            "(mid 9 = 9), got 8",
        ),
    ],
)
def test_each_problem_names_its_field(text, field, message):
    with pytest.raises(SpecError) as caught:
        load_cluster_config_yaml(text)
    problems = {e.field: e.message for e in caught.value.errors}
    assert field in problems, problems
    assert message in problems[field]


def test_child_quotas_may_fill_their_parents_and_other_types_are_free():
    config = load_cluster_config_yaml(
        "teams: {g: {quotas: {H100: {nominal: 8}}}, a: {parent: g, quotas: {H100: {nominal: 8}, A100: {nominal: 4}}},"
        " b: {parent: g, quotas: {A100: {nominal: 4}}}}"
    )
    assert config.ancestors("a") == ["g", "org"]


def test_the_head_refuses_to_start_on_a_bad_config(tmp_path):
    bad = tmp_path / "corral.yaml"
    bad.write_text(textwrap.dedent("teams:\n  a: {quotas: {H100: {nominal: two}}}\n"))
    result = subprocess.run(
        [sys.executable, "-m", "corral", "head", "--config", str(bad), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"CORRAL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 2
    assert "teams.a.quotas.H100.nominal" in result.stderr


@pytest.mark.parametrize(
    ("text", "field", "valid"),
    [
        ("teams: {p: {quotas: {H100: {nominal: .inf}}}}", "teams.p.quotas.H100.nominal", "from 0 to 1,000,000"),
        (
            "teams: {p: {quotas: {H100: {nominal: 2, borrowing_limit: .inf}}}}",
            "teams.p.quotas.H100.borrowing_limit",
            "from 0 to 1,000,000",
        ),
        ("gpu_speed: {H100: .inf}", "gpu_speed.H100", "from 0.001 to 1,000"),
        ("fair_share: {weights: {x: .nan}}", "fair_share.weights.x", "above 0 and at most 1,000,000"),
    ],
)
def test_infinite_or_nan_numbers_are_refused_with_their_path(text, field, valid):
    with pytest.raises(SpecError) as refused:
        load_cluster_config_yaml(text)
    got = "nan" if "nan" in text else "inf"
    assert str(refused.value) == f"{field}: must be a finite number {valid}, got {got}"


def test_field_errors_and_cross_field_errors_are_reported_together():
    text = """
    teams:
      a: {parent: nope, quotas: {H100: {nominal: -1}}}
      b: {members: [x, 5]}
    default_priority_class: ghost
    queues: {q: {time_limit: soon}}
    """
    with pytest.raises(SpecError) as info:
        load_cluster_config_yaml(textwrap.dedent(text))
    found = {e.field: e.message for e in info.value.errors}
    assert {
        "teams.a.quotas.H100.nominal",
        "teams.b.members[1]",
        "queues.q.time_limit",
        "teams.a.parent",
        "default_priority_class",
    } == set(found)
    assert "unknown team 'nope'" in found["teams.a.parent"]
    assert "unknown priority class 'ghost'" in found["default_priority_class"]


def test_a_cross_field_error_under_a_refused_value_is_not_reported_twice():
    text = "teams:\n  a: {quotas: {H100: {nominal: 4, lending_limit: lots}}}\n"
    with pytest.raises(SpecError) as info:
        load_cluster_config_yaml(text)
    assert [e.field for e in info.value.errors] == ["teams.a.quotas.H100.lending_limit"]


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("teams:\n  a: {quotaz: {}}\n", "teams.a.quotaz", "valid fields are parent, members, quotas"),
        (
            "teams:\n  a: {quotas: {H100: {nominal: 2, lending: 1}}}\n",
            "teams.a.quotas.H100.lending",
            "valid fields are nominal, borrowing_limit, lending_limit",
        ),
        (
            "fair_share: {weights: {a: -2}}\n",
            "fair_share.weights.a",
            "must be a number above 0 and at most 1,000,000, got -2",
        ),
    ],
)
def test_a_key_inside_a_named_section_is_named_with_what_is_valid(text, field, words):
    with pytest.raises(SpecError) as info:
        load_cluster_config_yaml(text)
    found = {e.field: e.message for e in info.value.errors}
    assert field in found, found
    assert words in found[field]


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (
            "teams: {a: {quotas: {H100: {nominal: true}}}}",
            "teams.a.quotas.H100.nominal",
            "expected a number of GPUs from 0 to 1,000,000, such as 8 or 0.5, got true",
        ),
        (
            "teams: {a: {quotas: {H100: {nominal: 4, borrowing_limit: false}}}}",
            "teams.a.quotas.H100.borrowing_limit",
            "got false",
        ),
        ("teams: {a: {quotas: {H100: {nominal: 'four'}}}}", "teams.a.quotas.H100.nominal", "got 'four'"),
        (
            "teams: {a: {quotas: {H100: {nominal: 1e308}}}}",
            "teams.a.quotas.H100.nominal",
            "expected a number of GPUs from 0 to 1,000,000, such as 8 or 0.5, got 1e308",
        ),
        ("teams: {a: {quotas: {H100: {nominal: 8, lending_limit: 1000001}}}}", "teams.a.quotas.H100.lending_limit", ""),
        (
            'priority_classes: {high: {value: 10, preemptible: "yes"}}',
            "priority_classes.high.preemptible",
            "expected true or false, got 'yes'",
        ),
        ("priority_classes: {high: {value: 10, preemptible: 1}}", "priority_classes.high.preemptible", "got 1"),
        (
            "priority_classes: {high: {value: true}}",
            "priority_classes.high.value",
            "must be a whole number from -1,000,000 to 1,000,000, got true",
        ),
        ("priority_classes: {high: {value: 10.5}}", "priority_classes.high.value", "got 10.5"),
        ("priority_classes: {high: {value: '10'}}", "priority_classes.high.value", "got '10'"),
        ("priority_classes: {high: {value: 1000001}}", "priority_classes.high.value", "got 1000001"),
        ("teams: {a: {}}\nfair_share: {weights: {a: true}}", "fair_share.weights.a", "a weight above 0"),
        ("teams: {a: {}}\nfair_share: {weights: {a: 1e7}}", "fair_share.weights.a", "at most 1,000,000, such as 2"),
        ("gpu_speed: {H100: true}", "gpu_speed.H100", "expected a speed from 0.001 to 1,000, such as 1.0 or 0.2"),
        ("gpu_speed: {H100: 5000}", "gpu_speed.H100", "got 5000"),
    ],
)
def test_wrong_types_and_huge_numbers_are_refused_not_converted(text, field, message):
    with pytest.raises(SpecError) as refused:
        load_cluster_config_yaml(text)
    found = {e.field: e.message for e in refused.value.errors}
    assert list(found) == [field], found
    assert message in found[field]


def test_numbers_yaml_reads_as_text_and_the_largest_quotas_still_load():
    config = load_cluster_config_yaml(
        "teams: {a: {quotas: {H100: {nominal: 1e3, borrowing_limit: 1000000, lending_limit: 0.5}}}}\n"
        "priority_classes: {top: {value: 1000000, preemptible: false}, bottom: {value: -1000000, preemptible: yes}}\n"
        "gpu_speed: {H100: 1000, L4: 0.2}"
    )
    assert config.teams["a"].quotas["H100"].nominal == 1000.0
    assert config.teams["a"].quotas["H100"].borrowing_limit == 1_000_000
    assert (config.priority_classes["top"].value, config.priority_classes["bottom"].preemptible) == (1_000_000, True)
    assert config.gpu_speed == {"H100": 1000.0, "L4": 0.2}


def test_a_priority_value_or_a_duration_yaml_reads_as_text_counts_as_a_number():
    config = load_cluster_config_yaml(
        "priority_classes: {high: {value: 1e3}, low: {value: -2E2}, mid: {value: 1.0e2}}\n"
        "queues: {q: {time_limit: 1e3}}\n"
        "fair_share: {half_life: 2e3}"
    )
    values = {name: c.value for name, c in config.priority_classes.items()}
    assert values == {"high": 1000, "low": -200, "mid": 100}
    assert all(type(v) is int for v in values.values())
    assert (config.queues["q"].time_limit_s, config.fair_share.half_life_s) == (1000.0, 2000.0)


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("priority_classes: {high: {value: 1e7}}", "priority_classes.high.value", "got '1e7'"),
        ("priority_classes: {high: {value: 1.5e0}}", "priority_classes.high.value", "got '1.5e0'"),
        ("queues: {q: {time_limit: -1e3}}", "queues.q.time_limit", "must be positive"),
        ("fair_share: {half_life: 1e999}", "fair_share.half_life", "ten years"),
    ],
)
def test_numbers_read_as_text_are_still_checked(text, field, message):
    with pytest.raises(SpecError) as refused:
        load_cluster_config_yaml(text)
    found = {e.field: e.message for e in refused.value.errors}
    assert list(found) == [field], found
    assert message in found[field]
