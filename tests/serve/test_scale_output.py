"""`corral service scale NAME N -o json` reports the service after the head took the new count in:
a real head and agent, a service of two examples/model_server.py replicas, scaled to 1 then 0."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.client.light import LightTransport
from corral.client.services import ServiceApi
from corral.testing.net import free_port
from corral.testing.procs import processes_mentioning, stop_group, wait_for

pytestmark = pytest.mark.e2e

MODEL_SERVER = Path(__file__).resolve().parents[2] / "examples" / "model_server.py"
START_S = 60.0


@dataclass
class Head:
    home: Path
    url: str

    def api(self) -> ServiceApi:
        token = json.loads((self.home / "client.json").read_text())["token"]
        return ServiceApi(LightTransport(self.url, token))

    def cli(self, *args: str) -> Any:
        result = CliRunner().invoke(cli, list(args), env={"CORRAL_HOME": str(self.home)}, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)


def _answers(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/healthz", timeout=2.0) as response:
        return bool(response.status == 200)
    return False


@pytest.fixture
def head(tmp_path: Path) -> Iterator[Head]:
    """``corral head`` and one ``corral agent`` (one fake GPU) on 127.0.0.1, in a home of their own."""
    home, port = tmp_path / "home", free_port()
    started = Head(home=home, url=f"http://127.0.0.1:{port}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORRAL_")} | {"CORRAL_HOME": str(home)}
    daemons: list[tuple[subprocess.Popen[bytes], signal.Signals]] = []

    def spawn(*args: str, sig: signal.Signals) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"{args[0]}.log").open("ab")
        with log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "corral", *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL, cwd=tmp_path, start_new_session=True,
            )  # fmt: skip
        daemons.append((proc, sig))
        return proc

    try:
        spawn("head", "--host", "127.0.0.1", "--port", str(port), "--grace", "1", sig=signal.SIGTERM)
        wait_for(lambda: _answers(started.url) and (home / "client.json").exists(), START_S, "the head to answer")
        join = json.loads((home / "client.json").read_text())["join_token"]
        agent = ["agent", "--head", started.url, "--token", join, "--name", "solo", "--fake-gpus", "1xH100:80GB"]
        spawn(*agent, "--work-dir", str(home / "agent"), sig=signal.SIGINT)  # SIGINT: it stops its tasks
        yield started
    finally:
        for proc, sig in reversed(daemons):
            stop_group(proc, sig)
        for pid in processes_mentioning(str(home)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_scale_reports_the_service_as_the_head_took_the_new_count_in(head, tmp_path):
    spec = {
        "kind": "service",
        "name": "sized",
        "command": [sys.executable, str(MODEL_SERVER)],
        "replicas": 2,
        "readiness": {"path": "/ready", "timeout": "1s", "hold": "10s"},
    }
    (tmp_path / "sized.yaml").write_text(json.dumps(spec))  # JSON is YAML
    assert head.cli("serve", str(tmp_path / "sized.yaml"), "-o", "json")["name"] == "sized"
    api = head.api()
    wait_for(lambda: api.service("sized")["replicas_ready"] == 2, START_S, "two ready replicas")

    one = head.cli("service", "scale", "sized", "1", "-o", "json")
    assert (one["replicas_desired"], one["replicas_ready"]) == (1, 1)
    assert sum(not r["draining"] and r["ready"] for r in one["replicas"]) == 1
    assert sum(r["draining"] for r in one["replicas"]) == 1

    none = head.cli("service", "scale", "sized", "0", "-o", "json")
    assert (none["replicas_desired"], none["replicas_ready"], none["replicas_max"]) == (0, 0, 0)
