"""Option values out of range are usage errors (exit 2) naming the option, never tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest


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
    assert "resources.gpus" in result.stderr
