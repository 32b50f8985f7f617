"""Helpers the benchmark scripts share: the CLI against a given CORRAL_HOME, free ports, percentiles,
and a cluster of real daemons whose agents can be killed like machines."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from corral.client.sdk import Client

T = TypeVar("T")

CORRAL = [sys.executable, "-m", "corral"]


def corral(home: Path, *args: str) -> str:
    """Run ``corral ARGS`` against the cluster under ``home``; its stdout."""
    env = {**os.environ, "CORRAL_HOME": str(home)}
    env.pop("CORRAL_HEAD", None)
    env.pop("CORRAL_TOKEN", None)
    return subprocess.run([*CORRAL, *args], env=env, check=True, capture_output=True, text=True).stdout.strip()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0–100) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.01) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:g}s")
        time.sleep(interval_s)


class Cluster:
    """A head and agents started from the daemons; agents can be killed like a machine and restarted."""

    def __init__(self, home: Path, head_options: list[str]) -> None:
        self.home = home
        self.url = f"http://127.0.0.1:{free_port()}"
        self.agents: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        port = self.url.rsplit(":", 1)[1]
        self.head = self._spawn(["head", "--port", port, *head_options], "head.log")
        wait_for(lambda: (home / "client.json").exists() and self._healthy(), 30, "the head to start", 0.05)
        config = json.loads((home / "client.json").read_text())
        self.join_token = config["join_token"]
        self.token = config["token"]
        self.client = Client(self.url, config["token"])

    def _healthy(self) -> bool:
        try:
            with Client(self.url, "", timeout_s=2.0) as probe:
                probe.health()
        except Exception:
            return False
        return True

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_HEAD", "CORRAL_TOKEN")}
        with (self.home / "logs" / log_name).open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "corral", *args],
                env={**env, "CORRAL_HOME": str(self.home)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start_agent(self, name: str, gpus: str) -> None:
        args = ["agent", "--head", self.url, "--token", self.join_token, "--name", name, "--fake-gpus", gpus]
        self.agents[name] = (self._spawn([*args, "--work-dir", str(self.home / "agents" / name)], f"{name}.log"), gpus)

    def wait_ready(self, names: list[str]) -> None:
        def ready() -> bool:
            return set(names) <= {n["name"] for n in self.client.nodes() if n["state"] == "READY"}

        wait_for(ready, 60, "the agents to register", 0.05)

    def kill_node(self, name: str) -> None:
        """SIGKILL the agent and every process of its tasks at once, as a power cut would."""
        agent, _ = self.agents[name]
        victims = [agent.pid, *marked_pids(f"CORRAL_TASK_MARKER={name}:")]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        agent.wait()

    def stop(self) -> None:
        self.client.close()
        for proc in [*(a for a, _ in self.agents.values()), self.head]:
            with contextlib.suppress(ProcessLookupError):  # SIGINT: an agent stops its tasks (SIGTERM leaves them)
                os.killpg(proc.pid, signal.SIGTERM if proc is self.head else signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def marked_pids(needle: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if needle.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
    return found
