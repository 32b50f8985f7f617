"""Latency the gateway adds, and the most requests/s through it (not part of `make test`).

Starts a local cluster for the run (`corral up`, one agent), serves examples/model_server.py as a
one-replica service, then drives the same replica with the same load generator twice:
  1. directly (the replica's own URL), and through the head's gateway (HEAD/s/NAME/), at a fixed
     rate (open loop: each request has its scheduled send time, and latency counts from it, so a
     stall is not hidden by the generator waiting); the targets take turns in one-second slices;
  2. closed loop with C connections, as fast as it goes: the most requests/s.
Optionally (--standalone) the same through `corral gateway` running as its own process.

    .venv/bin/python bench/gateway.py [--rate 500] [--seconds 10] [--connections 32] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchlib import corral, free_port, percentile

ROOT = Path(__file__).resolve().parents[1]
CORRAL = [sys.executable, "-m", "corral"]
BODY = json.dumps({"x": [0.5] * 16}).encode()


class Connection:
    """A minimal keep-alive HTTP/1.1 client: the same cheap code path for every target."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        path = parts.path.rstrip("/") + "/predict"
        self.request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n"
        ).encode() + BODY

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def post(self) -> int:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


async def post_once(conn: Connection) -> bool:
    """One request; False for an error answer or a broken connection (then reopened)."""
    try:
        return await conn.post() == 200
    except (OSError, asyncio.IncompleteReadError):
        conn.close()
        await conn.open()
        return False


async def fixed_rate(url: str, rate: float, seconds: float, connections: int) -> dict[str, Any]:
    conns = [Connection(url) for _ in range(connections)]
    await asyncio.gather(*(c.open() for c in conns))
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for c in conns:
        free.put_nowait(c)
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter() + 0.1
    total = int(rate * seconds)

    async def one(scheduled: float) -> None:
        nonlocal errors
        conn = await free.get()
        try:
            errors += not await post_once(conn)
        finally:
            free.put_nowait(conn)
        latencies.append(time.perf_counter() - scheduled)

    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    for c in conns:
        c.close()
    return {"requests": total, "errors": errors, "latencies": latencies}


def summary(slices: list[dict[str, Any]]) -> dict[str, float]:
    ms = [v * 1000 for s in slices for v in s["latencies"]]
    return {
        "requests": sum(s["requests"] for s in slices),
        "errors": sum(s["errors"] for s in slices),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
    }


async def max_rate(url: str, seconds: float, connections: int) -> dict[str, float]:
    conns = [Connection(url) for _ in range(connections)]
    await asyncio.gather(*(c.open() for c in conns))
    done = errors = 0
    deadline = time.perf_counter() + seconds

    async def loop(conn: Connection) -> None:
        nonlocal done, errors
        while time.perf_counter() < deadline:
            errors += not await post_once(conn)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in conns))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return {"requests": done, "errors": errors, "rps": done / elapsed}


def wait_ready(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not become ready")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(targets: dict[str, str], pids: dict[str, int], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Fixed rate, then max rate, for each target; the gateways' CPU time per request."""
    results: dict[str, dict[str, float]] = {}
    for url in targets.values():  # warm up every path first (connections, imports, caches)
        asyncio.run(fixed_rate(url, args.rate, 1.0, args.connections))
    # Targets that keep up take turns in one-second slices, so that the machine's other load
    # falls on each alike; the head's gateway, which may not keep up, runs alone afterwards.
    turns = [name for name in targets if name != "head gateway"]
    slices: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
    for _ in range(round(args.seconds)):
        for name in turns:
            slices[name].append(asyncio.run(fixed_rate(targets[name], args.rate, 1.0, args.connections)))
    alone = fixed_rate(targets["head gateway"], args.rate, args.seconds, args.connections)
    slices["head gateway"].append(asyncio.run(alone))
    for name in targets:
        results[f"{name} @ {args.rate:g}/s"] = summary(slices[name])
    for name, url in targets.items():
        before = cpu_seconds(pids[name]) if name in pids else 0.0
        results[f"{name} max"] = asyncio.run(max_rate(url, args.seconds, args.connections))
        if name in pids:
            spent = cpu_seconds(pids[name]) - before
            results[f"{name} max"]["cpu_us_per_request"] = 1e6 * spent / results[f"{name} max"]["requests"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--standalone", action="store_true", help="also measure `corral gateway` on its own")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="corral-bench-gw-"))
    port = free_port()
    head = corral(home, "up", "--agents", "1", "--port", str(port))
    gateway = None
    try:
        spec = {
            "kind": "service",
            "name": "bench",
            "command": [sys.executable, str(ROOT / "examples" / "model_server.py")],
            "replicas": {"min": 1, "max": 1},
            "readiness": {"path": "/ready"},
        }
        (home / "bench.yaml").write_text(json.dumps(spec))
        corral(home, "serve", str(home / "bench.yaml"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            svc = json.loads(corral(home, "service", "show", "bench", "-o", "json"))
            if svc["replicas_ready"] == 1:
                break
            time.sleep(0.2)
        replica = svc["replicas"][0]["url"]
        targets = {"direct": replica, "head gateway": f"{head}/s/bench/"}
        if args.standalone:
            gw_port = free_port()
            env = {**os.environ, "CORRAL_HOME": str(home)}
            gateway = subprocess.Popen(
                [*CORRAL, "gateway", "--port", str(gw_port)], env=env, stderr=(home / "gateway.log").open("w")
            )
            targets["corral gateway"] = f"http://127.0.0.1:{gw_port}/s/bench/"
            time.sleep(1.5)
            wait_ready(targets["corral gateway"].rstrip("/"))
        pids = {"head gateway": json.loads((home / "local-cluster.json").read_text())["head"]["pid"]}
        if gateway is not None:
            pids["corral gateway"] = gateway.pid
        results = measure(targets, pids, args)
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(10)
        corral(home, "down")
    with open("/proc/loadavg") as handle:
        loadavg = handle.read().split()[:3]
    report: dict[str, Any] = {"loadavg_after": loadavg, "results": results}
    direct = results[f"direct @ {args.rate:g}/s"]
    for name in ("head gateway", "corral gateway"):
        through = results.get(f"{name} @ {args.rate:g}/s")
        if through is not None:
            report[f"{name}: added p50 / p99 ms"] = [
                round(through["p50_ms"] - direct["p50_ms"], 2),
                round(through["p99_ms"] - direct["p99_ms"], 2),
            ]
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
