"""An agent refuses a join token it cannot send before it writes or sends anything."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from corral.agent.agent import AgentOptions
from corral.agent.gpus import Inventory
from corral.agent.main import run
from corral.client.errors import InvalidRequest
from corral.testing.net import free_port


@pytest.mark.parametrize("token", ["ключ", "a\nb", "a\x7fb", "cj_ x"])
def test_the_agent_command_names_a_token_it_cannot_send(token, tmp_path):
    """Run as a user does; nothing listens at the head URL, so an agent that went on would keep trying."""
    argv = ["agent", "--head", f"http://127.0.0.1:{free_port()}", "--token", token, "--name", "x"]
    argv += ["--fake-gpus", "1xH100", "--runtime", "none"]
    env = {**os.environ, "CORRAL_HOME": str(tmp_path)}
    env.pop("CORRAL_JOIN_TOKEN", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "corral", *argv], capture_output=True, text=True, env=env, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the agent started with a token it cannot send")
    assert done.returncode == 2, done.stderr
    assert "--token" in done.stderr and "printable ASCII without spaces" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "agents" / "x").exists()  # nothing written


def test_run_checks_the_token_before_its_work_directory(tmp_path):
    options = AgentOptions(name="x", work_dir=tmp_path / "work")
    with pytest.raises(InvalidRequest, match=r"^--token \(or CORRAL_JOIN_TOKEN\): character 1 is 'к'"):
        run(options, f"http://127.0.0.1:{free_port()}", "ключ", Inventory(gpus=[], source="none"))
    assert not options.work_dir.exists()
