"""Helpers the benchmark scripts share: the CLI against a given CORRAL_HOME, free ports, percentiles."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

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
