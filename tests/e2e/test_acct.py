"""`corral acct` and the usage in `corral show`, against a real head (with GPU prices) and agent."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from corral.testing.net import free_port
from corral.testing.procs import stop_group, wait_for

pytestmark = pytest.mark.e2e


class Cli:
    def __init__(self, home: Path) -> None:
        self.home = home

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_HEAD", "CORRAL_TOKEN", "CORRAL_JOIN_TOKEN")}
        return {**env, "CORRAL_HOME": str(self.home)}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "corral", *args], capture_output=True, text=True, timeout=60, env=self.env()
        )

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.returncode == 0, f"corral {' '.join(args)}: {result.stderr}"
        return result.stdout

    def spawn(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        with (self.home / log).open("wb") as out:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(
                [sys.executable, "-m", "corral", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,
            )


def _healthy(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
        return response.status == 200
    return False


@pytest.fixture
def priced_cluster(tmp_path: Path) -> Iterator[Cli]:
    """`corral head --gpu-prices H100=2.5,A100=1.2` and one agent with one fake H100."""
    cli = Cli(tmp_path / "home")
    cli.home.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs = [
        cli.spawn("head", "--port", str(port), "--gpu-prices", "H100=2.5,A100=1.2", "--grace", "1", log="head.log")
    ]
    try:
        wait_for(lambda: _healthy(url) and (cli.home / "client.json").exists(), 30, "the head")
        token = json.loads((cli.home / "client.json").read_text())["join_token"]
        agent = ["agent", "--head", url, "--token", token, "--name", "solo", "--fake-gpus", "1xH100:80GB"]
        procs.append(cli.spawn(*agent, "--work-dir", str(cli.home / "agent"), log="agent.log"))
        wait_for(lambda: "READY" in cli.ok("nodes"), 30, "the agent")
        yield cli
    finally:
        for proc in reversed(procs):
            stop_group(proc, signal.SIGTERM if proc is procs[0] else signal.SIGINT)  # SIGINT: the agent stops its tasks


@pytest.mark.timeout(90)
def test_acct_and_show_report_a_finished_jobs_usage(priced_cluster):
    cli = priced_cluster
    job_id = json.loads(cli.ok("run", "--gpus", "1", "--team", "research", "-o", "json", "--", "sleep 2"))["id"]
    assert cli("wait", job_id, "--timeout", "40").returncode == 0
    job = json.loads(cli.ok("show", job_id, "-o", "json"))
    held = (datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])).total_seconds()
    assert job["usage"]["gpu_seconds"] == pytest.approx(held, abs=0.002)
    assert job["usage"]["cost"] == pytest.approx(held / 3600 * 2.5, abs=2e-6)
    assert job["usage"]["energy_kwh"] > 0  # a busy fake GPU draws power
    assert "GPU-hours" in cli.ok("show", job_id)

    report = json.loads(cli.ok("acct", "--by", "team", "--since", "1h", "-o", "json"))
    assert [r["key"] for r in report["rows"]] == ["research"]
    assert report["rows"][0]["gpu_seconds"] == job["usage"]["gpu_seconds"]
    assert report["total"]["cost"] == job["usage"]["cost"]
    rows = list(csv.DictReader(io.StringIO(cli.ok("acct", "--by", "job", "-o", "csv"))))
    assert [(r["key"], float(r["gpu_seconds"])) for r in rows] == [(job_id, job["usage"]["gpu_seconds"])]
    assert "research" in cli.ok("acct", "--by", "team")
    assert json.loads(cli.ok("acct", "--until", "2000-01-01", "-o", "json"))["rows"] == []

    bad = cli("acct", "--since", "last tuesday")
    assert bad.returncode == 2
    assert "--since" in bad.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--gpu-prices", "H100=cheap"), ("--gpu-prices", "H100"), ("--gpu-prices", "H100=-1"), ("--idle-after", "soon")],
)
def test_head_refuses_bad_prices_and_idle_options(tmp_path, option, value):
    result = Cli(tmp_path)("head", "--port", "1", option, value)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {option}: ")
