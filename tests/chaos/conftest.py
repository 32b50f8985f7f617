"""Clusters for fault tests: a head and agents as subprocesses that the tests kill, cut off and restart.

Every daemon gets its own log under the cluster's home; a test that fails prints where to look.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from corral.client.sdk import Client
from corral.testing.net import free_port
from corral.testing.procs import descendants, processes_mentioning, wait_for

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"})


@dataclass
class ChaosCluster:
    """A head on ``host:port`` with its SQLite database under ``home``, and agents; any of them may be
    SIGKILLed and started again with the same arguments."""

    home: Path
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    head_options: Sequence[str] = ()
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    agent_args: dict[str, list[str]] = field(default_factory=dict)
    agent_prefix: dict[str, list[str]] = field(default_factory=dict)
    TERMINAL = TERMINAL

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CORRAL_")}
        env["CORRAL_HOME"] = str(self.home)
        return env

    def _spawn(self, name: str, args: list[str], prefix: Sequence[str] = ()) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        with (self.home / "logs" / f"{name}.log").open("ab") as log:
            self.daemons[name] = subprocess.Popen(
                [*prefix, sys.executable, "-m", "corral", *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.home,
                start_new_session=True,
            )

    def start_head(self) -> None:
        args = ["head", "--host", self.host, "--port", str(self.port), *self.head_options]
        self._spawn("head", args)
        head = self.daemons["head"]
        wait_for(lambda: head.poll() is not None or self.healthy(), 60, "the head to answer", interval_s=0.05)
        assert head.poll() is None, self.log("head")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2.0) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def kill(self, name: str) -> None:
        """SIGKILL the daemon alone (its children, a head has none, are left to the test)."""
        proc = self.daemons[name]
        proc.kill()
        proc.wait(10)

    def token(self, kind: str = "token") -> str:
        value = json.loads((self.home / "client.json").read_text())[kind]
        assert isinstance(value, str)
        return value

    def client(self, timeout_s: float = 30.0) -> Client:
        return Client(self.url, self.token(), timeout_s=timeout_s)

    def start_agent(self, name: str, gpus: str, *options: str, prefix: Sequence[str] = (), head: str = "") -> None:
        args = ["agent", "--head", head or self.url, "--token", self.token("join_token"), "--name", name]
        args += ["--fake-gpus", gpus, "--work-dir", str(self.home / "agents" / name), *options]
        self.agent_args[name], self.agent_prefix[name] = args, list(prefix)
        self._spawn(name, args, prefix)

    def wait_ready(self, *names: str, timeout_s: float = 60.0) -> None:
        with self.client() as client:
            wait_for(
                lambda: {n["name"] for n in client.nodes() if n["state"] == "READY"} >= set(names),
                timeout_s,
                f"nodes {', '.join(names)} to be READY",
                interval_s=0.2,
            )

    def kill_node(self, name: str) -> None:
        """SIGKILL the node's agent and every process under it, as a power cut would."""
        agent = self.daemons[name]
        victims = {agent.pid, *descendants(agent.pid)} | set(processes_mentioning(f"CORRAL_TASK_MARKER={name}:"))
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        agent.wait(10)
        wait_for(lambda: not processes_mentioning(f"CORRAL_TASK_MARKER={name}:"), 5.0, f"node {name} to be dead")

    def log(self, name: str) -> str:
        path = self.home / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else f"(no log at {path})"

    def stop(self) -> None:
        for name, proc in reversed(list(self.daemons.items())):  # agents first: they tell the head how tasks ended
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # SIGINT: an agent stops its tasks (SIGTERM leaves them)
                    os.killpg(proc.pid, signal.SIGTERM if name == "head" else signal.SIGINT)
        for proc in self.daemons.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        for pid in processes_mentioning(str(self.home)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def chaos_home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def make_cluster(chaos_home: Path) -> Iterator[Any]:
    """``make_cluster(head_options, host=…)``: a started head; stopped with everything it ran at the end."""
    made: list[ChaosCluster] = []

    def make(head_options: Sequence[str] = (), host: str = "127.0.0.1") -> ChaosCluster:
        cluster = ChaosCluster(home=chaos_home, host=host, head_options=list(head_options))
        made.append(cluster)
        cluster.start_head()
        return cluster

    yield make
    for cluster in made:
        cluster.stop()
        leftovers = processes_mentioning(str(cluster.home))
        assert not leftovers, f"processes left after the test: {leftovers}"
