"""`corral up --fake-gpus`: every agent of the local cluster has the same GPUs. A different spec while
agents run exits 2 before anything starts; agents added later get the running agents' GPUs; after
`corral down` a new spec applies to them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from corral.cli import local, localagents
from corral.cli.main import cli

from .conftest import Locks

Running = Callable[..., dict[str, Any]]  # running(spec, *names): a state whose agents run


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.delenv("CORRAL_HEAD", raising=False)
    monkeypatch.setattr(local, "spawn", lambda *a, **k: pytest.fail("nothing may start"))
    return tmp_path


@pytest.fixture
def spawned(home: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines of the agents `up` starts (none really starts)."""
    started: list[list[str]] = []

    def spawn(args: list[str], log: Path, home: Path, secrets: Any = None) -> int:
        started.append(args)
        return os.getpid()  # alive, as a started agent is

    monkeypatch.setattr(local, "spawn", spawn)
    return started


@pytest.fixture
def running(home: Path, locks: Locks) -> Running:
    """A cluster state whose agents ``names`` run with ``spec``: this process stands in for them, holding
    their work directories' locks."""

    def state(spec: str, *names: str) -> dict[str, Any]:
        agents = [{"name": n, "pid": locks.hold(home / "agents" / n / "agent.lock"), "fake_gpus": spec} for n in names]
        return {"agents": agents, "fake_gpus": spec}

    return state


def fake_gpus_of(args: list[str]) -> str | None:
    return args[args.index("--fake-gpus") + 1] if "--fake-gpus" in args else None


@pytest.mark.parametrize("asked", ["4xL4", "none", "2xH100:40GB"])
def test_up_with_other_gpus_than_the_running_agents_exits_2_and_changes_nothing(
    home: Path, asked: str, running: Running
) -> None:
    state = running("2xH100", "local-1")
    (home / local.STATE_FILE).write_text(json.dumps(state))
    result = CliRunner().invoke(cli, ["up", "--agents", "2", "--fake-gpus", asked])
    assert getattr(result.exception, "exit_code", None) == 2
    assert str(result.exception) == (
        f"--fake-gpus {asked}: the 1 running agent(s) have 2xH100, and every agent gets the same GPUs; run"
        " `corral down` first to change them, or give the same spec (or leave --fake-gpus out)"
    )
    assert json.loads((home / local.STATE_FILE).read_text()) == state


def test_running_agents_without_fake_gpus_are_named_as_such(home: Path, running: Running) -> None:
    (home / local.STATE_FILE).write_text(json.dumps(running("", "local-1", "local-2")))
    result = CliRunner().invoke(cli, ["up", "--fake-gpus", "1xA100"])
    assert getattr(result.exception, "exit_code", None) == 2
    assert "the 2 running agent(s) have the GPUs NVML finds (--fake-gpus none)" in str(result.exception)


@pytest.mark.parametrize("asked", [None, "2xH100", "2xH100:80GB", "1xH100,1xH100:80GB"])
def test_agents_added_to_running_ones_get_their_gpus(
    home: Path, spawned: list[list[str]], asked: str | None, running: Running
) -> None:
    state = running("2xH100", "local-1")
    state["fake_gpus"] = "4xL4"  # what an older `up` recorded for agents started later
    localagents.check_fake_gpus(home, state, asked)
    names, started = local._ensure_agents(home, state, "http://127.0.0.1:1", "cj_x", 3, asked)
    assert (names, sorted(started)) == (["local-1", "local-2", "local-3"], ["local-2", "local-3"])
    assert [fake_gpus_of(args) for args in spawned] == ["2xH100", "2xH100"]
    assert [a["fake_gpus"] for a in state["agents"]] == ["2xH100"] * 3


def test_after_down_a_new_spec_applies_to_every_agent(home: Path, spawned: list[list[str]], running: Running) -> None:
    state = running("2xH100", "local-1", "local-2")
    for agent in state["agents"]:
        agent["pid"] = None  # `corral down`
    localagents.check_fake_gpus(home, state, "4xL4")
    local._ensure_agents(home, state, "http://127.0.0.1:1", "cj_x", 2, "4xL4")
    assert [fake_gpus_of(args) for args in spawned] == ["4xL4", "4xL4"]
    assert state["fake_gpus"] == "4xL4"


def runtime_of(args: list[str]) -> str | None:
    return args[args.index("--runtime") + 1] if "--runtime" in args else None


def test_up_with_another_runtime_than_the_running_agents_exits_2_and_changes_nothing(
    home: Path, running: Running
) -> None:
    state = running("2xH100", "local-1")
    state["agents"][0]["runtime"] = "none"
    (home / local.STATE_FILE).write_text(json.dumps(state))
    result = CliRunner().invoke(cli, ["up", "--agents", "2", "--runtime", "podman"])
    assert getattr(result.exception, "exit_code", None) == 2
    assert str(result.exception) == (
        "--runtime podman: the 1 running agent(s) use none, and every agent uses the same; run `corral down`"
        " first to change it (or leave --runtime out)"
    )
    assert json.loads((home / local.STATE_FILE).read_text()) == state


def test_agents_added_to_running_ones_get_their_runtime(home: Path, spawned: list[list[str]], running: Running) -> None:
    state = running("2xH100", "local-1")
    state["agents"][0]["runtime"] = "none"
    state["runtime"] = "docker"  # what an older `up` recorded for agents started later
    localagents.check_runtime(home, state, "none")
    local._ensure_agents(home, state, "http://127.0.0.1:1", "cj_x", 2, None)
    assert [runtime_of(args) for args in spawned] == ["none"]
    assert [a["runtime"] for a in state["agents"]] == ["none", "none"]


def corral(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_HEAD", "CORRAL_TOKEN", "CORRAL_JOIN_TOKEN")}
    env["CORRAL_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "corral", *args], capture_output=True, text=True, env=env, timeout=90, check=False
    )


def gpus_by_node(home: Path) -> dict[str, list[str]]:
    done = corral(home, "nodes", "-o", "json")
    assert done.returncode == 0, done.stderr
    return {n["name"]: sorted(g["type"] for g in n["gpus"]) for n in json.loads(done.stdout)}


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_real_cluster_keeps_one_inventory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        first = corral(home, "up", "--fake-gpus", "2xH100", "--runtime", "none")
        assert first.returncode == 0, first.stderr
        other = corral(home, "up", "--fake-gpus", "4xL4")
        assert other.returncode == 2 and "the 1 running agent(s) have 2xH100" in other.stderr
        assert corral(home, "up", "--agents", "2").returncode == 0
        assert gpus_by_node(home) == {"local-1": ["H100"] * 2, "local-2": ["H100"] * 2}
        again = corral(home, "up", "--agents", "2", "--fake-gpus", "2xH100")
        assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, "")
        assert corral(home, "down").returncode == 0
        assert corral(home, "up", "--fake-gpus", "4xL4").returncode == 0
        assert gpus_by_node(home) == {"local-1": ["L4"] * 4, "local-2": ["L4"] * 4}
    finally:
        corral(home, "down")
