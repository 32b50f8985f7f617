"""Values that used to be read loosely are refused, each naming its field and what is valid."""

from __future__ import annotations

import pytest

from corral.spec import SpecError, parse_duration_s, parse_job_spec
from corral.spec.arrays import parse_array


def the_error(data) -> tuple[str, str]:
    with pytest.raises(SpecError) as info:
        parse_job_spec({"command": "x", **data})
    assert len(info.value.errors) == 1, info.value.errors
    error = info.value.errors[0]
    return error.field, error.message


@pytest.mark.parametrize(
    ("text", "index"),
    [("1,1,2", 1), ("0-3,2-5", 2), ("5,0-9", 5), ("7-8,8", 8)],
)
def test_an_array_index_listed_twice_is_refused_naming_it(text, index):
    field, message = the_error({"array": text})
    assert field == "array"
    assert f"index {index} is listed twice" in message


@pytest.mark.parametrize("text", ["0-3%", "0-3% ", "1,2%"])
def test_an_array_limit_sign_with_nothing_after_it_is_refused(text):
    field, message = the_error({"array": text})
    assert field == "array"
    assert "the limit after % must be a whole number of at least 1" in message


@pytest.mark.parametrize("text", ["\u0663", "0-\u0663", "0-3%\u00b2", "0-3%\u0663"])
def test_array_indices_and_limits_are_ascii_digits(text):
    field, _ = the_error({"array": text})
    assert field == "array"


def test_arrays_that_list_each_index_once_still_parse():
    spec = parse_array("0-2,5,7-8%2")
    assert (spec.indices, spec.limit) == ((0, 1, 2, 5, 7, 8), 2)


@pytest.mark.parametrize(
    ("text", "unit"),
    [("00:99:00", "minutes"), ("1:60:00", "minutes"), ("0:00:60", "seconds"), ("5:75", "seconds")],
)
def test_clock_durations_refuse_minutes_or_seconds_of_60_or_more(text, unit):
    with pytest.raises(ValueError, match=f"{unit} must be below 60"):
        parse_duration_s(text)
    field, message = the_error({"time_limit": text})
    assert field == "time_limit"
    assert f"{unit} must be below 60" in message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1h70m", "minutes must be below 60 after hours"),
        ("1h30m90s", "seconds must be below 60 after minutes"),
        ("1d24h", "hours must be below 24 after days"),
        ("30m1h", "from the largest down"),
        ("1h1h", "from the largest down"),
    ],
)
def test_durations_in_units_refuse_parts_past_the_unit_above(text, words):
    with pytest.raises(ValueError, match=words):
        parse_duration_s(text)
    field, message = the_error({"time_limit": text})
    assert field == "time_limit" and words in message


@pytest.mark.parametrize(
    ("text", "seconds"), [("90m", 5400), ("36h", 129600), ("1d23h59m59s", 172799), ("1h0.5m", 3630)]
)
def test_a_duration_in_units_may_lead_with_any_size(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize(("text", "seconds"), [("99:00", 5940), ("100:00:00", 360000), ("0:59:59", 3599)])
def test_the_leading_part_of_a_clock_duration_may_be_any_size(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("value", ["", " ", "H100,,A100", "H100,", [""], ["H100", " "]])
def test_an_empty_gpu_type_name_is_refused(value):
    field, message = the_error({"resources": {"gpu_type": value}})
    assert field == "resources.gpu_type"
    assert "empty" in message and "H100" in message


@pytest.mark.parametrize("value", [None, []])
def test_no_gpu_type_at_all_means_any_type(value):
    assert parse_job_spec({"command": "x", "resources": {"gpu_type": value}}).resources.gpu_type == []


@pytest.mark.parametrize("value", [-1, -0.5, "-1", "-30s"])
def test_a_negative_grace_period_must_not_be_negative(value):
    field, message = the_error({"grace_period": value})
    assert field == "grace_period"
    assert "must not be negative" in message and "positive" not in message


@pytest.mark.parametrize("value", [0, "0", "0s", "0m", "00:00:00", 0.0])
def test_a_grace_period_of_zero_kills_at_once(value):
    assert parse_job_spec({"command": "x", "grace_period": value}).grace_period_s == 0.0


def test_a_time_limit_of_zero_or_less_must_still_be_positive():
    assert "must be positive" in the_error({"time_limit": 0})[1]
    assert "must be positive" in the_error({"time_limit": "-5m"})[1]
