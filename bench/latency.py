"""Latency and throughput of a local Corral cluster (not part of `make test`).

Measures, on an idle local cluster started for the run (2 agents × 4 fake H100):
  1. submit → the job's first line runs: p50/p99 over N sequential one-GPU jobs;
  2. a 2-node gang: submit → both ranks run;
  3. submissions/s through the Python client for M jobs (batched, and concurrent single submits);
  4. wall time of `corral jobs` and `corral --help`.

    .venv/bin/python bench/latency.py [--jobs 100] [--submissions 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchlib import corral, free_port, percentile

from corral.client.sdk import Client

CORRAL = [sys.executable, "-m", "corral"]


def wait_for_lines(path: Path, count: int, timeout_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            lines = path.read_text().split()
            if len(lines) >= count:
                return lines
        time.sleep(0.0005)
    raise TimeoutError(f"{path} did not get {count} lines in {timeout_s}s")


def start_latency(client: Client, work: Path, jobs: int) -> list[float]:
    """Seconds from the submit call to the job's first command, one job at a time on an idle cluster."""
    samples = []
    for i in range(jobs):
        mark = work / f"start-{i}"
        before = time.time()
        job = client.submit({"command": f"date +%s.%N > {mark}", "resources": {"gpus": 1}, "workdir": str(work)})
        started = float(wait_for_lines(mark, 1)[0])
        samples.append(started - before)
        while client.job(job["id"])["state"] not in ("SUCCEEDED", "FAILED"):
            time.sleep(0.005)
    return samples


def gang_latency(client: Client, work: Path, runs: int) -> list[float]:
    samples = []
    for i in range(runs):
        mark = work / f"gang-{i}"
        before = time.time()
        job = client.submit(
            {"command": f"date +%s.%N >> {mark}", "nodes": 2, "resources": {"gpus": 4}, "workdir": str(work)}
        )
        lines = wait_for_lines(mark, 2)
        samples.append(max(float(x) for x in lines) - before)
        while client.job(job["id"])["state"] not in ("SUCCEEDED", "FAILED"):
            time.sleep(0.005)
    return samples


def submission_rates(client: Client, head_url: str, token: str, count: int) -> dict[str, float]:
    # Low-priority whole-cluster gangs, cancelled afterwards: the point is the submit path.
    spec = {"command": "true", "resources": {"gpus": 4}, "nodes": 2, "priority": -1}
    rates: dict[str, float] = {}
    before = time.perf_counter()
    ids: list[str] = []
    for start in range(0, count, 500):
        ids += client.submit_batch([spec] * min(500, count - start))
    rates["batched_per_s"] = count / (time.perf_counter() - before)
    client.cancel(ids)

    def one(_: int) -> str:
        return str(local.submit(spec)["id"])

    local = Client(head_url, token)
    before = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        ids = list(pool.map(one, range(count)))
    rates["concurrent_single_per_s"] = count / (time.perf_counter() - before)
    client.cancel(ids)
    local.close()
    return rates


def command_wall(home: Path, *args: str, repeat: int = 15) -> float:
    env = {**os.environ, "CORRAL_HOME": str(home)}
    samples = []
    for _ in range(repeat):
        before = time.perf_counter()
        subprocess.run(
            ["corral", *args] if _on_path() else [*CORRAL, *args], env=env, check=True, stdout=subprocess.DEVNULL
        )
        samples.append(time.perf_counter() - before)
    return statistics.median(samples)


def _on_path() -> bool:
    return Path(sys.executable).with_name("corral").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--gangs", type=int, default=20)
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if _on_path():
        os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    with tempfile.TemporaryDirectory(prefix="corral-bench-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        url = corral(home, "up", "--agents", "2", "--fake-gpus", "4xH100:80GB", "--port", str(free_port()))
        token = json.loads(corral(home, "config", "-o", "json"))["token"]
        try:
            client = Client(url, token)
            wall_jobs_idle = command_wall(home, "jobs")
            wall_help = command_wall(home, "--help")
            start = start_latency(client, work, args.jobs)
            gang = gang_latency(client, work, args.gangs)
            rates = submission_rates(client, url, token, args.submissions)
            wall_jobs_full = command_wall(home, "jobs", "--state", "PENDING", "--state", "RUNNING", repeat=5)
            client.close()
        finally:
            corral(home, "down")
    result = {
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "start_latency_ms": {
            "p50": percentile(start, 50) * 1000,
            "p99": percentile(start, 99) * 1000,
            "max": max(start) * 1000,
            "n": len(start),
        },
        "gang_2x4_latency_ms": {"p50": percentile(gang, 50) * 1000, "p99": percentile(gang, 99) * 1000, "n": len(gang)},
        "submissions": rates,
        "corral_jobs_wall_ms": wall_jobs_idle * 1000,
        "corral_help_wall_ms": wall_help * 1000,
        "corral_jobs_after_submissions_wall_ms": wall_jobs_full * 1000,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
