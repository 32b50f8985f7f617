"""The head at scale (not part of `make test`): many agents heartbeating, and a backlog drained.

heartbeats  one head; N simulated agents in this process (aiohttp, one session, asyncio) register
            with 8 fake GPUs each and heartbeat every INTERVAL s with their task reports and GPU
            readings, as real agents do, while a stream of jobs (1–8 GPUs, DURATION s) flows onto
            them: they report each task RUNNING, then EXITED 0 once its time is up. Reports the
            heartbeat round trip (p50/p99/max, as the agents see it) and the head's CPU use.
drain       one head and N real `corral agent` processes with G fake GPUs each; JOBS one-GPU
            `sleep S` jobs submitted at once (batched); the makespan from the first submission to
            the last job's end, and starts per second.

  .venv/bin/python bench/scale.py heartbeats [--agents 2000] [--interval 2] [--seconds 60] [--job-rate 20]
  .venv/bin/python bench/scale.py drain [--agents 64] [--gpus 8] [--jobs 5000] [--sleep 1]
  either with [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
from benchlib import Cluster, percentile, wait_for

GPUS_PER_SIMULATED_NODE = 8
LOADAVG = Path("/proc/loadavg")


@dataclass
class SimulatedAgent:
    name: str
    token: str = ""
    version: int = -1
    ends: dict[str, float] = field(default_factory=dict)  # task id → when it exits
    generations: dict[str, int] = field(default_factory=dict)
    last_reports: list[dict[str, Any]] = field(default_factory=list)  # what the previous heartbeat said

    def reports(self, now: float) -> list[dict[str, Any]]:
        out = []
        for task, end in self.ends.items():
            state = {"state": "EXITED", "exit_code": 0} if now >= end else {"state": "RUNNING"}
            out.append({"task_id": task, "generation": self.generations[task], "master_port": 29500, **state})
        return out

    def learn(self, desired: dict[str, Any], sent: list[dict[str, Any]], now: float, duration_s: float) -> None:
        """Take in a heartbeat's answer, as an agent does: the exits it reported are heard, and a desired
        state is applied only when its version is newer than the one it has."""
        for report in sent:
            if report["state"] == "EXITED":
                self.ends.pop(report["task_id"], None)
                self.generations.pop(report["task_id"], None)
        if desired["version"] <= self.version:
            return
        self.version = desired["version"]
        wanted = {t["task_id"]: t for t in desired["tasks"]}
        for task_id in list(self.ends):
            if task_id not in wanted:  # acknowledged (or stopped): forget it
                del self.ends[task_id], self.generations[task_id]
        for task_id, task in wanted.items():
            if task_id not in self.ends:
                self.ends[task_id] = now + duration_s
                self.generations[task_id] = task["generation"]


def samples() -> list[dict[str, Any]]:
    return [
        {"index": i, "utilization": 50.0, "memory_used_mb": 1000, "temperature_c": 50.0, "power_w": 200.0}
        for i in range(GPUS_PER_SIMULATED_NODE)
    ]


async def heartbeats(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    latencies: list[float] = []
    changed: list[float] = []  # the heartbeats whose task reports differ from the node's previous one
    failures: list[str] = []
    stop_at = 0.0
    connector = aiohttp.TCPConnector(limit=256)
    async with aiohttp.ClientSession(cluster.url, connector=connector) as http:
        agents = [SimulatedAgent(f"sim{i:05d}") for i in range(args.agents)]
        gpus = [{"index": i, "type": "H100", "memory_mb": 81920} for i in range(GPUS_PER_SIMULATED_NODE)]
        gate = asyncio.Semaphore(32)

        async def register(agent: SimulatedAgent) -> None:
            body = {"name": agent.name, "gpus": gpus, "cpus": 64, "memory_mb": 512_000, "gpu_source": "fake"}
            async with gate:
                headers = {"Authorization": f"Bearer {cluster.join_token}"}
                async with http.post("/v1/agents/register", json=body, headers=headers) as response:
                    assert response.status == 200, await response.text()
                    reply = await response.json()
            agent.token = reply["node_token"]
            agent.version = reply["desired"]["version"]

        registered = asyncio.Event()
        count = [0]

        async def beat_forever(agent: SimulatedAgent) -> None:
            await register(agent)  # then heartbeat at once, as an agent does
            count[0] += 1
            if count[0] == len(agents):
                registered.set()
            await asyncio.sleep(random.uniform(0, args.interval))
            headers = {"Authorization": f"Bearer {agent.token}"}
            while time.monotonic() < stop_at:
                due = time.monotonic() + args.interval
                now = time.monotonic()
                reports = agent.reports(now)
                body = {"tasks": reports, "applied_version": agent.version, "samples": samples()}
                news = reports != agent.last_reports
                agent.last_reports = reports
                sent = time.perf_counter()
                try:
                    async with http.post(f"/v1/agents/{agent.name}/heartbeat", json=body, headers=headers) as r:
                        reply = await r.json()
                        if r.status == 409:  # declared lost: register again, as a real agent does
                            failures.append(f"{agent.name}: {r.status} {reply}")
                            agent.ends.clear()
                            agent.generations.clear()
                            await register(agent)
                            headers = {"Authorization": f"Bearer {agent.token}"}
                        elif r.status != 200:
                            failures.append(f"{agent.name}: {r.status} {reply}")
                        else:
                            latencies.append(time.perf_counter() - sent)
                            if news:
                                changed.append(latencies[-1])
                            agent.learn(reply, reports, time.monotonic(), args.job_seconds)
                except aiohttp.ClientError as exc:
                    failures.append(f"{agent.name}: {exc!r}")
                await asyncio.sleep(max(0.0, due - time.monotonic()))

        async def submit_forever() -> int:
            submitted = 0
            headers = {"Authorization": f"Bearer {cluster.token}"}
            while time.monotonic() < stop_at:
                batch = [
                    {"command": "true", "resources": {"gpus": random.choice([1, 1, 1, 2, 4, 8])}}
                    for _ in range(args.job_rate)
                ]
                async with http.post("/v1/jobs/batch", json={"jobs": batch}, headers=headers) as r:
                    assert r.status == 201, await r.text()
                submitted += len(batch)
                await asyncio.sleep(1.0)
            return submitted

        head = psutil.Process(cluster.head.pid)
        started = time.monotonic()
        stop_at = started + 3600.0
        beats = [asyncio.create_task(beat_forever(a)) for a in agents]
        await registered.wait()
        print(f"{args.agents} agents registered in {time.monotonic() - started:.1f} s", file=sys.stderr)
        warmup_until = time.monotonic() + args.interval * 2
        stop_at = warmup_until + args.seconds
        submitter = asyncio.create_task(submit_forever())
        await asyncio.sleep(max(0.0, warmup_until - time.monotonic()))
        latencies.clear()
        changed.clear()
        me = psutil.Process()
        cpu_before, own_before, wall_before = head.cpu_times(), me.cpu_times(), time.monotonic()
        await asyncio.gather(*beats)
        cpu_after, own_after, wall_after = head.cpu_times(), me.cpu_times(), time.monotonic()
        submitted = await submitter
    own_cpu = (own_after.user + own_after.system - own_before.user - own_before.system) / (wall_after - wall_before)
    head_cpu = (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / (wall_after - wall_before)
    finished = sum(1 for j in cluster.client.jobs(include_all=True) if j["state"] == "SUCCEEDED")
    ms = [x * 1000 for x in latencies]
    news_ms = [x * 1000 for x in changed] or [0.0]
    return {
        "agents": args.agents,
        "interval_s": args.interval,
        "measured_s": round(wall_after - wall_before, 1),
        "heartbeats": len(ms),
        "heartbeats_per_s": round(len(ms) / (wall_after - wall_before), 1),
        "p50_ms": round(percentile(ms, 50), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1),
        "with_task_changes": len(changed),
        "with_task_changes_p50_ms": round(percentile(news_ms, 50), 1),
        "with_task_changes_p99_ms": round(percentile(news_ms, 99), 1),
        "failures": len(failures),
        "first_failures": failures[:3],
        "head_cpu_cores": round(head_cpu, 2),
        "simulated_agents_cpu_cores": round(own_cpu, 2),
        "jobs_submitted": submitted,
        "jobs_succeeded": finished,
        "loadavg": LOADAVG.read_text().split()[:3],  # noqa: ASYNC240 (a /proc read does not block)
    }


def drain(args: argparse.Namespace, cluster: Cluster) -> dict[str, Any]:
    for i in range(args.agents):
        cluster.start_agent(f"d{i:03d}", f"{args.gpus}xH100:80GB")
    cluster.wait_ready([f"d{i:03d}" for i in range(args.agents)])
    print(f"{args.agents} agents ready", file=sys.stderr)
    spec = {"command": f"sleep {args.sleep}", "resources": {"gpus": 1}}
    client = cluster.client
    processes = [psutil.Process(cluster.head.pid)] + [psutil.Process(p.pid) for p, _ in cluster.agents.values()]
    cpu_before = [_cpu_s(p) for p in processes]
    started = time.monotonic()
    ids: list[str] = []
    for first in range(0, args.jobs, 1000):
        ids += client.submit_batch([spec] * min(1000, args.jobs - first))
    submitted_s = time.monotonic() - started

    def done() -> bool:  # from the metrics: listing 5,000 jobs twice a second would load the head itself
        with urllib.request.urlopen(f"{cluster.url}/metrics", timeout=30) as response:
            text = response.read().decode()
        counts = {
            line.split('state="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("corral_jobs{")
        }
        return bool(sum(counts.get(s, 0) for s in ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")) >= args.jobs)

    wait_for(done, 900, "the backlog to drain", 2.0)
    cpu_used = [_cpu_s(p) - before for p, before in zip(processes, cpu_before, strict=True)]
    jobs = client.jobs(include_all=True)
    makespan = max(j["finished_at"] for j in jobs)
    first_submit = min(j["submitted_at"] for j in jobs)
    from datetime import datetime

    span = (datetime.fromisoformat(makespan) - datetime.fromisoformat(first_submit)).total_seconds()
    failed = [j for j in jobs if j["state"] != "SUCCEEDED"]
    return {
        "agents": args.agents,
        "gpus_per_agent": args.gpus,
        "jobs": args.jobs,
        "sleep_s": args.sleep,
        "submit_s": round(submitted_s, 1),
        "makespan_s": round(span, 1),
        "ideal_s": round(args.jobs * args.sleep / (args.agents * args.gpus), 1),
        "starts_per_s": round(args.jobs / span, 1),
        "not_succeeded": len(failed),
        "not_succeeded_first": [f"{j['id']} {j['state']}: {j.get('reason', '')}" for j in failed[:5]],
        "head_cpu_ms_per_job": round(cpu_used[0] * 1000 / args.jobs, 1),
        "agents_cpu_ms_per_job": round(sum(cpu_used[1:]) * 1000 / args.jobs, 1),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
    }


def _cpu_s(process: psutil.Process) -> float:
    """CPU seconds of a process and its children that have ended (a task's shell and command)."""
    times = process.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    sub = parser.add_subparsers(dest="what", required=True)
    beats = sub.add_parser("heartbeats")
    beats.add_argument("--agents", type=int, default=2000)
    beats.add_argument("--interval", type=float, default=2.0)
    beats.add_argument("--seconds", type=float, default=60.0)
    beats.add_argument("--job-rate", type=int, default=20, help="jobs submitted per second")
    beats.add_argument("--job-seconds", type=float, default=20.0, help="how long each job runs")
    backlog = sub.add_parser("drain")
    backlog.add_argument("--agents", type=int, default=64)
    backlog.add_argument("--gpus", type=int, default=8)
    backlog.add_argument("--jobs", type=int, default=5000)
    backlog.add_argument("--sleep", type=float, default=1.0)
    args = parser.parse_args()

    head_options = ["--heartbeat-interval", str(getattr(args, "interval", 2.0))]
    with tempfile.TemporaryDirectory(prefix="corral-scale-") as tmp:
        cluster = Cluster(Path(tmp), head_options)
        try:
            result = asyncio.run(heartbeats(args, cluster)) if args.what == "heartbeats" else drain(args, cluster)
        finally:
            cluster.stop()
    text = json.dumps({args.what: result}, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
