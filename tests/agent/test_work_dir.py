"""An agent's work directory: one agent each, and a clear refusal naming the option that chose it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from corral import pidlock
from corral.agent.agent import AgentOptions
from corral.agent.gpus import Inventory
from corral.agent.main import run
from corral.client.errors import InvalidRequest
from corral.testing.net import free_port


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@contextmanager
def held(work_dir: Path) -> Iterator[None]:
    """The work directory as a running agent leaves it: its lock held, by this process."""
    work_dir.mkdir(parents=True, exist_ok=True)
    fd = pidlock.hold(work_dir / "agent.lock")
    try:
        yield
    finally:
        os.close(fd)


def start(options: AgentOptions) -> None:
    run(options, f"http://127.0.0.1:{free_port()}", "cj_test", Inventory(gpus=[], source="none"))


def test_a_work_dir_given_with_another_agent_in_it_names_work_dir(tmp_path: Path) -> None:
    """As a user runs it: a second agent, of another name, pointed at a running agent's work directory."""
    work_dir = tmp_path / "shared"
    with held(work_dir):
        argv = ["agent", "--head", f"http://127.0.0.1:{free_port()}", "--token", "cj_test", "--name", "other"]
        argv += ["--work-dir", str(work_dir), "--fake-gpus", "1xH100", "--runtime", "none"]
        env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
        done = subprocess.run(
            [sys.executable, "-m", "corral", *argv], capture_output=True, text=True, env=env, timeout=30
        )
    assert done.returncode == 2, done.stderr
    assert f"error: --work-dir {work_dir}: another agent (pid {os.getpid()}) already runs" in done.stderr
    assert "give this one another --work-dir" in done.stderr and "--name" not in done.stderr


def test_a_work_dir_derived_from_the_name_names_the_name(home: Path) -> None:
    work_dir = home / "agents" / "n1"
    with held(work_dir), pytest.raises(InvalidRequest) as raised:
        start(AgentOptions(name="n1", work_dir=work_dir))
    assert str(raised.value) == (
        f"--name 'n1': another agent (pid {os.getpid()}) already runs with the work directory {work_dir}; stop it"
        " first, or give this one another --name"
    )


def test_a_work_dir_that_cannot_be_created_names_work_dir(home: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    work_dir = tmp_path / "afile" / "work"
    with pytest.raises(InvalidRequest) as raised:
        start(AgentOptions(name="n1", work_dir=work_dir))
    assert (
        str(raised.value)
        == f"--work-dir: cannot create the directory {work_dir}: {tmp_path / 'afile'} is a file, not a directory"
    )


@pytest.mark.parametrize("where", ["afile", "afile/sub"])
def test_a_corral_home_that_cannot_be_created_names_corral_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    (tmp_path / "afile").write_text("")
    home = tmp_path / where
    monkeypatch.setenv("CORRAL_HOME", str(home))
    with pytest.raises(InvalidRequest, match=f"^CORRAL_HOME: .*{tmp_path / 'afile'} is a file, not a directory"):
        start(AgentOptions(name="n1", work_dir=home / "agents" / "n1"))
