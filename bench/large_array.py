"""A large array on a small local cluster (not part of `make test`): does the control plane keep its agents?

Starts `corral up --agents 2 --fake-gpus 4xH100:80GB` under a temporary CORRAL_HOME, submits one array
(`corral run --array 0-N-1 [--gpus G] -- COMMAND`), and waits until every element has ended. Reports the
drain time (submit to the last element's end), the elements' end states, how many ended because a node
was lost or its agent fenced its tasks (the stall this checks for: none is the goal), and the agents'
"no contact with the head" lines.

    .venv/bin/python bench/large_array.py [--elements 10000] [--gpus 0] [--timeout 900] -- echo out
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import corral, free_port

LOADAVG = Path("/proc/loadavg")
LOST_WORDS = ("lost", "fenced", "stopped answering", "declared")


def _jobs(home: Path, limit: int) -> list[dict[str, Any]] | None:
    """The jobs, or None where the head did not answer this time (busy past the client's timeout)."""
    try:
        return list(json.loads(corral(home, "jobs", "-o", "json", "--limit", str(limit))))
    except subprocess.CalledProcessError as failed:
        if failed.returncode != 3:  # 3: the head did not answer; anything else is a real failure
            raise
        return None


def run(elements: int, gpus: float, command: list[str], timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="corral-array-") as tmp:
        home = Path(tmp)
        corral(home, "up", "--agents", "2", "--fake-gpus", "4xH100:80GB", "--port", str(free_port()))
        load_before = LOADAVG.read_text().split()[0]
        try:
            started = time.monotonic()
            gpu_args = ["--gpus", f"{gpus:g}"] if gpus else []
            corral(home, "run", "--array", f"0-{elements - 1}", *gpu_args, "--", *command)
            submitted_s = time.monotonic() - started
            jobs: list[dict[str, Any]] = []
            unanswered = 0  # polls the head did not answer in time: asked again, and counted in the result
            while True:
                polled = _jobs(home, elements)
                if polled is None:
                    unanswered += 1
                else:
                    jobs = polled
                done = polled is not None and all(j["finished_at"] for j in jobs)
                if done or time.monotonic() - started > timeout_s:
                    break
                time.sleep(2.0)
            drain_s = time.monotonic() - started
            states = collections.Counter(j["state"] for j in jobs)
            lost = [j for j in jobs if any(w in (j["reason"] or "") for w in LOST_WORDS)]
            logs = [p.read_text(errors="replace") for p in (home / "logs").glob("agent-*.log")]
            no_contact = [line[:200] for text in logs for line in text.splitlines() if "with the head" in line]
        finally:
            corral(home, "down")
        return {
            "elements": elements,
            "gpus": gpus,
            "command": command,
            "submit_s": round(submitted_s, 2),
            "drain_s": round(drain_s, 1),
            "all_ended": bool(jobs) and all(j["finished_at"] for j in jobs),
            "polls_unanswered": unanswered,
            "states": dict(states),
            "ended_by_node_loss_or_fencing": len(lost),
            "agent_no_contact_lines": no_contact[:4],
            "loadavg_before": load_before,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=10_000)
    parser.add_argument("--gpus", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=900.0, help="give up waiting after this many seconds")
    parser.add_argument("--json", type=Path)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    result = run(args.elements, args.gpus, args.command, args.timeout)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
