"""Recovery of distributed training after a machine failure, and gang start latency (not part of `make test`).

Measures, with real daemons on 127.0.0.1 under a temporary CORRAL_HOME:
  1. idle cluster, 2 agents × 8 fake H100: submit → every rank of a 2-node × 8-GPU gang (per-gpu,
     16 processes) runs its first command; p50/p99 over N runs;
  2. a PyTorch DDP job (examples/ddp_train.py, 2 nodes × 2 processes, gloo) on 3 nodes × 2 fake GPUs:
     one node of the gang dies (its agent and every process under it, SIGKILL) once the job has saved
     a checkpoint; times from the death to the job RUNNING again (every rank of the new attempt
     started) and to the first training step after the resume, in two cases:
       - "node returns": its agent is started again at once (a reboot, a quick repair);
       - "node gone": it stays dead; the job moves to the spare node.

    .venv/bin/python bench/recovery.py [--gangs 20] [--recoveries 3] [--node-timeout 10] [--agent-lease S]
                                       [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from benchlib import Cluster, percentile, wait_for

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
TRAIN = f"{sys.executable} {ROOT / 'examples' / 'ddp_train.py'} --timeout 30 --steps 1000000 --step-seconds 0.05"


@contextlib.contextmanager
def cluster(head_options: list[str], agents: dict[str, str]) -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="corral-recovery-") as tmp:
        running = Cluster(Path(tmp), head_options)
        try:
            for name, gpus in agents.items():
                running.start_agent(name, gpus)
            running.wait_ready(list(agents))
            yield running
        finally:
            running.stop()


def gang_latency(runs: int) -> list[float]:
    """Seconds from the submit call until the last of 16 ranks has started its command."""
    samples = []
    with cluster([], {"g1": "8xH100:80GB", "g2": "8xH100:80GB"}) as c, tempfile.TemporaryDirectory() as work:
        for i in range(runs):
            marks = Path(work) / f"run-{i}"
            marks.mkdir()
            spec = {
                "command": f"date +%s.%N > {marks}/rank-$RANK",
                "nodes": 2,
                "resources": {"gpus": 8},
                "launcher": "per-gpu",
            }
            before = time.time()
            job = c.client.submit(spec)
            wait_for(lambda m=marks: len(list(m.iterdir())) == 16, 30, "16 ranks", 0.002)
            time.sleep(0.05)  # every rank has written its line
            samples.append(max(float(p.read_text()) for p in marks.iterdir()) - before)
            wait_for(lambda j=job["id"]: c.client.job(j)["state"] == "SUCCEEDED", 30, "the gang to finish")
    return samples


def first_step_after(c: Cluster, job_id: str, generation: int) -> float | None:
    """When rank 0 of that attempt finished its first step (Unix time), from its log on the node."""
    for log in c.home.glob(f"agents/*/tasks/{job_id}/{generation}/rank-0.log"):
        for line in log.read_text(errors="replace").splitlines():
            if "first step of this attempt done at" in line:
                return float(line.rsplit(" ", 1)[1])
    return None


def recover_once(c: Cluster, node_returns: bool) -> dict[str, float]:
    spec = {
        "command": f"{TRAIN} --checkpoint-every 5",
        "nodes": 2,
        "resources": {"gpus": 2},
        "launcher": "per-gpu",
        "max_restarts": 3,
    }
    job_id = c.client.submit(spec)["id"]
    job = wait_for(lambda: (j := c.client.job(job_id))["state"] == "RUNNING" and j, 90, "the job to run", 0.05)
    checkpoint = Path(job["checkpoint_dir"]) / ".corral-checkpoint"
    wait_for(checkpoint.exists, 90, "the first checkpoint", 0.02)
    job = c.client.job(job_id)
    if job["state"] != "RUNNING":
        raise RuntimeError(f"the job stopped before the node died: {job['reason']}")
    restarts = job["restarts"]  # usually 0; an overloaded machine may have restarted it already
    victim = next(t["node"] for t in job["tasks"] if t["node_rank"] == 1)
    died = time.time()
    c.kill_node(victim)
    if node_returns:
        c.start_agent(victim, c.agents[victim][1])

    def running_again() -> dict[str, Any] | None:
        job = c.client.job(job_id)
        return job if job["state"] == "RUNNING" and job["restarts"] > restarts else None

    again = wait_for(running_again, 120, "the job to run again", 0.01)
    running_at = time.time()
    generation = max(t["generation"] for t in again["tasks"])
    stepped = wait_for(lambda: first_step_after(c, job_id, generation), 120, "the first step after resume", 0.02)
    c.client.cancel([job_id])
    wait_for(lambda: not any(g["allocated_to"] for n in c.client.nodes() for g in n["gpus"]), 60, "idle", 0.1)
    if not node_returns:
        c.start_agent(victim, c.agents[victim][1])
    c.wait_ready(list(c.agents))
    return {"running_s": running_at - died, "first_step_s": stepped - died, "restarts": again["restarts"] - restarts}


def recovery(runs: int, node_timeout: float, lease: float | None) -> dict[str, list[dict[str, float]]]:
    options = ["--node-timeout", str(node_timeout), "--grace", "3"]
    options += ["--agent-lease", str(lease)] if lease else []
    agents = {"r1": "2xH100:80GB", "r2": "2xH100:80GB", "r3": "2xH100:80GB"}
    results: dict[str, list[dict[str, float]]] = {"node_returns": [], "node_gone": []}
    with cluster(options, agents) as c:
        for _ in range(runs):
            for case in results:
                results[case].append(recover_once(c, node_returns=case == "node_returns"))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs", type=int, default=20)
    parser.add_argument("--recoveries", type=int, default=3)
    parser.add_argument("--node-timeout", type=float, default=10.0, help="passed to corral head")
    parser.add_argument("--agent-lease", type=float, help="passed to corral head (default: the head's)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    gang = gang_latency(args.gangs)
    recoveries = recovery(args.recoveries, args.node_timeout, args.agent_lease) if args.recoveries else {}
    result: dict[str, Any] = {
        "loadavg_before": load_before,
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        "gang_2x8_all_ranks_running_ms": {
            "p50": percentile(gang, 50) * 1000,
            "p99": percentile(gang, 99) * 1000,
            "n": len(gang),
        },
        "node_timeout_s": args.node_timeout,
        "agent_lease_s": args.agent_lease or max(args.node_timeout + 5, 15),
    }
    for case, runs in recoveries.items():
        result[f"recovery_{case}"] = {
            "running_again_s": [round(r["running_s"], 2) for r in runs],
            "first_step_s": [round(r["first_step_s"], 2) for r in runs],
            "median_running_again_s": round(statistics.median(r["running_s"] for r in runs), 2),
            "median_first_step_s": round(statistics.median(r["first_step_s"] for r in runs), 2),
            "restarts": [r["restarts"] for r in runs],
        }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
