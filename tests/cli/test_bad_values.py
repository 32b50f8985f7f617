"""Option values out of range are usage errors (exit 2) naming the option, never tracebacks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from corral.cli.main import main


def corral(*args: str, home) -> subprocess.CompletedProcess[str]:
    env = {"CORRAL_HOME": str(home), "CORRAL_HEAD": "http://127.0.0.1:9", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "corral", *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["acct", "--since", "99999999d"], "--since"),
        (["acct", "--until", "99999999w"], "--until"),
        (["top", "--interval", "-1"], "--interval"),
        (["top", "--interval", "0"], "--interval"),
        (["top", "--interval", "nan", "--once"], "--interval"),
        (["wait", "--timeout", "nan", "j-x"], "--timeout"),
        (["wait", "--timeout", "inf", "j-x"], "--timeout"),
    ],
)
def test_out_of_range_values_exit_2_naming_the_option(tmp_path, args, named):
    result = corral(*args, home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_run_spec_exits_2_even_with_no_head_configured(tmp_path):
    env = {"CORRAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-m", "corral", "run", "--gpus", "0.001", "--", "true"]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    said = "must be a whole number from 0 to 64 or a fraction from 0.01 to below 1"
    assert f"--gpus (resources.gpus): {said}" in result.stderr


def test_run_names_the_option_behind_each_bad_field(tmp_path):
    env = {"CORRAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-m", "corral", "run", "--time-limit", "abc", "--memory", "1.5", "--", "true"]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--time-limit (time_limit): expected a duration" in result.stderr
    assert "--memory (resources.memory): a number without a unit is MiB" in result.stderr


def test_events_beyond_the_cap_exit_2_naming_it(tmp_path):
    result = corral("events", "-n", "10001", home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "--limit" in result.stderr and "10,000" in result.stderr


def test_why_help_lists_every_check_the_head_runs():
    from click.testing import CliRunner

    from corral.cli.main import cli
    from corral.sched.why import CAPACITY, FREE, GPU_TYPE, RUNTIME, STATE

    text = " ".join(CliRunner().invoke(cli, ["why", "--help"]).output.split())
    positions = [text.index(f"{check} (") for check in (STATE, RUNTIME, GPU_TYPE, CAPACITY, FREE)]
    assert positions == sorted(positions)


def test_serving_a_file_without_kind_service_exits_2(tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("name: x\ncommand: python train.py\n")
    result = corral("serve", str(job), home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "kind" in result.stderr and "kind: service" in result.stderr


def test_acct_reads_a_period_in_several_units_as_a_time_limit_does():
    from datetime import UTC, datetime

    from corral.cli.acct import parse_when
    from corral.client.errors import InvalidRequest

    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert parse_when("--since", "1h30m", now) == "2026-01-01T10:30:00+00:00"
    assert parse_when("--since", "2w", now) == "2025-12-18T12:00:00+00:00"
    assert parse_when("--since", "2025-01-31T08:00", now) == "2025-01-31T08:00:00+00:00"
    with pytest.raises(InvalidRequest, match="--since: minutes must be below 60 after hours"):
        parse_when("--since", "1h70m", now)
    assert parse_when("--since", "1w2d", now) == "2025-12-23T12:00:00+00:00"  # weeks lead, as 2w alone does
    assert parse_when("--since", "1w12h", now) == "2025-12-25T00:00:00+00:00"
    with pytest.raises(InvalidRequest, match="--since: days must be below 7 after weeks"):
        parse_when("--since", "1w9d", now)


def test_acct_reads_weeks_then_other_units_as_far_back_as_one_unit_reaches():
    from datetime import UTC, datetime

    from corral.cli.acct import parse_when
    from corral.client.errors import InvalidRequest

    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert parse_when("--since", "2w0d", now) == parse_when("--since", "2w", now)
    assert parse_when("--since", "4000d1h", now) == "2015-01-19T11:00:00+00:00"  # as far back as 4000d goes
    assert parse_when("--since", "600w1d", now) == "2014-07-02T12:00:00+00:00"
    for given in ("1w1w", "1d1w", "2d1w3h"):
        with pytest.raises(InvalidRequest, match=f"units must go from the largest down.*got '{given}'"):
            parse_when("--since", given, now)


def test_acct_reads_a_time_with_a_zone_in_utc_and_refuses_one_it_takes_out_of_range():
    from datetime import UTC, datetime

    from corral.cli.acct import parse_when
    from corral.client.errors import InvalidRequest

    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert parse_when("--since", "2025-01-31T08:00+02:00", now) == "2025-01-31T06:00:00+00:00"
    with pytest.raises(InvalidRequest, match=re.escape("--since: '0001-01-01T00:00+05:00' is not between")):
        parse_when("--since", "0001-01-01T00:00+05:00", now)
    with pytest.raises(InvalidRequest, match="--until: '9999-12-31T23:00-02:00' is not between"):
        parse_when("--until", "9999-12-31T23:00-02:00", now)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "1d", "--until", "2d"], "must be before --until '2d' ("),
        (["--since", "2999-01-01"], "--since '2999-01-01' (2999-01-01T00:00:00+00:00) must be before --until (now, "),
        (["--since", "2025-01-02", "--until", "2025-01-02"], "must be before --until '2025-01-02' (2025-01-02T00:00"),
    ],
)
def test_acct_refuses_a_period_that_ends_before_it_starts_naming_both_ends(tmp_path, args, says):
    result = corral("acct", *args, home=tmp_path)  # refused before any request: no head is needed
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["show", ""], "JOB"),
        (["logs", " "], "JOB"),
        (["why", ""], "JOB"),
        (["wait", "j-1", ""], "JOB"),
        (["cancel", ""], "JOB"),
        (["preempt", ""], "JOB"),
        (["checkpoint-done", ""], "[JOB]"),
        (["events", "--job", ""], "--job"),
        (["drain", ""], "NODE"),
        (["undrain", " "], "NODE"),
        (["service", "show", ""], "NAME"),
        (["service", "scale", "", "2"], "NAME"),
        (["service", "delete", ""], "NAME"),
        (["token", "revoke", ""], "TOKEN_ID"),
    ],
)
def test_an_empty_name_is_bad_usage_naming_the_argument(tmp_path, args, named):
    result = corral(*args, home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"Invalid value for '{named}" in result.stderr and "is needed" in result.stderr


@pytest.mark.parametrize(
    ("args", "text", "expected"),
    [
        (["submit", "-"], "command: [true\n", "standard input is not valid YAML at line 2"),
        (["submit", "-"], "", "standard input must be a mapping of fields"),
        (["submit", "-"], "command: 'true'\nresources: {gpus: 1.5}\n", "resources.gpus: must be a whole number"),
        (["serve", "-"], "kind: service\nname: [x\n", "standard input is not valid YAML at line 3"),
    ],
)
def test_a_bad_spec_on_standard_input_is_named_as_such(tmp_path, args, text, expected):
    import corral

    env = {"CORRAL_HOME": str(tmp_path), "CORRAL_HEAD": "http://127.0.0.1:9", "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = str(Path(corral.__file__).parents[1])  # the code under test
    command = [sys.executable, "-m", "corral", *args]
    result = subprocess.run(command, input=text, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "- is not" not in result.stderr and "- must" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("rank", ["-1", "-10"])
def test_a_negative_rank_exits_2_naming_the_option_and_the_ranks(monkeypatch, tmp_path, capsys, rank):
    """Refused before the head is asked (here there is none): the head's own refusal named a query field."""
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.setenv("CORRAL_HEAD", "http://127.0.0.1:9")
    with pytest.raises(SystemExit) as ended:
        main(["logs", "j-x", "--rank", rank])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"'--rank': {rank}: a rank is a whole number from 0 (the first process) to the job's WORLD_SIZE - 1" in err
