"""Throughput of the pure scheduler at scale (not part of `make test`).

A cluster of NODES nodes × 8 GPUs of 4 types (a quarter each), in racks of 32 nodes, and a queue of
JOBS pending jobs: 1-8 GPUs on one node (a share FRACTIONAL of them 0.25 or 0.5 of a GPU, sharing
GPUs), 5 % multi-node gangs of 2-8 nodes × 8 GPUs (up to 64 GPUs, packed by rack), 50 teams,
priorities 0-3, some time limits and preemptible jobs; every team has a quota on every type (its
even share, borrowing allowed) and fair-share usage. Then full cycles: each cycle
calls `schedule()` on the whole snapshot (every pending job, every running job), applies the
placements, and between cycles a share of the running jobs finishes, freeing GPUs.

    .venv/bin/python bench/sched_throughput.py [--nodes 10000] [--jobs 100000] [--cycles 20]
        [--finish 0.05] [--fractional 0.05] [--policy default] [--seed 3]

It prints each cycle's time (wall clock, and the process's CPU time, which another process on a
shared machine disturbs less) and placements, the placements per second over all cycles, and the
p50/p99 cycle time. A cycle's time includes the garbage collection that follows it; the bench's own
inputs are frozen out of the collector's sight before the first cycle, as a head's are at start.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from corral.collector import collections_paused
from corral.head.main import GC_YOUNG_THRESHOLD
from corral.model import FairShare, Gpu, Job, LiveAllocation, Node, NodeState, Request, RunningJob, TeamQuota, interned
from corral.sched import Snapshot, get_policy, schedule

TYPES = ("H100", "A100", "L40S", "L4")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cluster(nodes: int) -> tuple[Node, ...]:
    out = []
    for i in range(nodes):
        gpu_type = TYPES[i * len(TYPES) // nodes]
        gpus = tuple(Gpu(index=g, type=gpu_type, memory_mb=81920) for g in range(8))
        out.append(Node(f"n{i:05d}", NodeState.READY, gpus, 128.0, 1 << 20, {"rack": f"r{i // 32:04d}"}))
    return tuple(out)


def queue(jobs: int, teams: int, rng: random.Random, fractional: float = 0.05) -> list[Job]:
    out = []
    for seq in range(jobs):
        if rng.random() < 0.05:
            request = interned(Request(nodes=rng.randint(2, 8), gpus_per_node=8.0, gpu_types=(rng.choice(TYPES),)))
        else:
            types = tuple(rng.sample(TYPES, rng.randint(1, 2)))
            gpus = rng.choice((0.25, 0.5)) if rng.random() < fractional else float(rng.choice((1, 1, 1, 2, 4, 8)))
            request = interned(Request(nodes=1, gpus_per_node=gpus, gpu_types=types))
        out.append(
            Job(
                id=f"j{seq:06d}",
                seq=seq,
                request=request,
                priority=rng.choice((0, 0, 0, 1, 2, 3)),
                submitted_at=NOW,
                user=f"u{rng.randrange(teams * 4)}",
                team=f"t{rng.randrange(teams)}",
                time_limit_s=rng.choice((None, 3600.0, 14400.0)),
                preemptible=rng.random() < 0.3,
            )
        )
    return out


def quotas(nodes: int, teams: int) -> dict[str, dict[str, TeamQuota]]:
    per_type = nodes * 8 / len(TYPES)
    share = per_type / teams
    return {f"t{t}": {ty: TeamQuota(nominal=share, borrowing_limit=share * 4) for ty in TYPES} for t in range(teams)}


def usage(teams: int, rng: random.Random) -> FairShare:
    return FairShare(
        teams={f"t{t}": {ty: rng.uniform(0, 1e6) for ty in TYPES} for t in range(teams)},
        users={f"u{u}": {ty: rng.uniform(0, 1e5) for ty in TYPES} for u in range(teams * 4)},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--finish", type=float, default=0.05, help="share of running jobs that end between cycles")
    parser.add_argument("--fractional", type=float, default=0.05, help="share of one-node jobs asking 0.25 or 0.5 GPU")
    parser.add_argument("--policy", default="default")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    # The garbage collector runs as in a head (whose scheduling loop this stands for): young
    # collections every GC_YOUNG_THRESHOLD allocations, none during a cycle.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    rng = random.Random(args.seed)
    policy = get_policy(args.policy)
    nodes = cluster(args.nodes)
    pending = {j.id: j for j in queue(args.jobs, args.teams, rng, args.fractional)}
    live: dict[str, tuple[LiveAllocation, ...]] = {}
    running: dict[str, RunningJob] = {}
    fair = usage(args.teams, rng)
    table = quotas(args.nodes, args.teams)
    # The cluster and queue stand for what a head has held for a while (its job cache fills as jobs are
    # submitted): out of the collector's sight before the first cycle, as a head's start-up objects are
    # (``quieten_garbage_collection``), so that the first cycles' collections do not walk the harness's own
    # hundreds of thousands of new objects. What the cycles make is still collected after each cycle.
    gc.collect()
    gc.freeze()
    times: list[float] = []
    cpu_times: list[float] = []
    placed_total = 0
    now = NOW
    for cycle in range(args.cycles):
        snap = Snapshot(
            nodes=nodes,
            live=tuple(a for allocs in live.values() for a in allocs),
            pending=tuple(pending.values()),
            running=tuple(running.values()),
            quotas=table,
            fair_share=fair,
        )
        start, cpu_start = time.perf_counter(), time.process_time()
        with collections_paused():  # as the head's scheduling loop runs it
            plan = schedule(snap, policy, now)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        times.append(elapsed)
        cpu_times.append(cpu)
        placed_total += len(plan.placements)
        for placement in plan.placements:
            job = pending.pop(placement.job_id)
            live[job.id] = tuple(LiveAllocation(job.id, a) for a in placement.allocations)
            running[job.id] = RunningJob(
                job.id, now, job.priority, job.preemptible, job.time_limit_s, None, False, job.user, job.team
            )
        for victim in {p.victim_job_id for p in plan.preemptions}:
            live.pop(victim, None)
            running.pop(victim, None)
        print(
            f"cycle {cycle:2d}: {elapsed * 1000:8.1f} ms ({cpu * 1000:7.1f} ms CPU), {len(plan.placements):6d} placed, "
            f"{len(plan.preemptions):4d} preempted, {len(pending):6d} pending, {len(running):6d} running"
        )
        for job_id in rng.sample(sorted(running), int(len(running) * args.finish)):
            live.pop(job_id)
            running.pop(job_id)
        now += timedelta(seconds=60)
    total = sum(times)
    p99 = sorted(times)[max(0, round(0.99 * len(times)) - 1)]
    print(f"\n{placed_total} placements in {total:.2f} s of scheduling: {placed_total / total:,.0f} placements/s")
    p50, worst = statistics.median(times), max(times)
    print(f"cycle time p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {worst * 1000:.0f} ms")
    cpu_total = sum(cpu_times)
    print(f"CPU time {cpu_total:.2f} s: {placed_total / cpu_total:,.0f} placements per CPU-second")


if __name__ == "__main__":
    main()
