"""Speed of the simulator's engine on a large trace (not part of `make test`).

By default it synthesises a trace with a fixed seed: N jobs with Philly-like sizes (93 % one
GPU, up to 64-GPU gangs) and durations (log-normal, median about 1,100 s, heavy tail),
arriving as a Poisson process that offers the cluster LOAD of its GPU time. The cluster is
GPUS / 8 nodes × 8 identical GPUs in racks of 32. With --trace it replays a CSV in the common
schema instead (--scale-load makes its jobs arrive that many times faster).

    .venv/bin/python bench/sim_speed.py [--jobs 100000] [--gpus 10000] [--load 1.5] [--seed 7]
        [--policy default] [--repeat 3] [--trace FILE --scale-load X]

It prints the time to build the workload, the median wall and CPU time of `simulate` over the repeats,
and the load average at the end.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from pathlib import Path

from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, prepare, read_trace, simulate, summarize
from corral.spec import ClusterSpec, NodeGroupSpec

SIZES = ((1, 0.932), (2, 0.022), (4, 0.023), (8, 0.020), (16, 0.0024), (32, 0.0008), (64, 0.0002))
MEDIAN_S = 1_144.0
SIGMA = 1.8  # mean about 5 x median
MAX_S = 86_400.0


def synthesize(jobs: int, gpus: int, load: float, seed: int) -> Trace:
    """A reproducible trace that offers ``load`` × ``gpus`` GPU-seconds per second."""
    rng = random.Random(seed)
    sizes = [s for s, _ in SIZES]
    weights = [w for _, w in SIZES]
    drawn = [
        (rng.choices(sizes, weights)[0], min(MAX_S, math.ceil(MEDIAN_S * math.exp(rng.gauss(0, SIGMA)))))
        for _ in range(jobs)
    ]
    mean_work = sum(g * d for g, d in drawn) / jobs
    rate = load * gpus / mean_work  # arrivals per second
    now = 0.0
    out = []
    for number, (size, duration) in enumerate(drawn):
        now += rng.expovariate(rate)
        out.append(TraceJob(id=f"syn-{number:06d}", submit_s=float(int(now)), duration_s=float(duration), gpus=size))
    return Trace(jobs=tuple(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--load", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--policy", default="default")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace")
    parser.add_argument("--scale-load", type=float, default=1.0)
    args = parser.parse_args()

    started = time.perf_counter()
    cluster = ClusterSpec(
        node_groups=[
            NodeGroupSpec(name="gpu", count=args.gpus // 8, gpus_per_node=8, gpu_type="H100", nodes_per_rack=32)
        ]
    )
    nodes = build_nodes(cluster)
    if args.trace:
        trace = read_trace(args.trace, limit=args.jobs, scale_load=args.scale_load)
    else:
        trace = synthesize(args.jobs, len(nodes) * 8, args.load, args.seed)
    workload = prepare(trace, nodes)
    build_s = time.perf_counter() - started
    policy = get_policy(args.policy)
    times, cpu_times = [], []
    for _ in range(args.repeat):
        started, cpu_started = time.perf_counter(), time.process_time()
        result = simulate(workload, nodes, policy, cluster.gpu_speed)
        times.append(time.perf_counter() - started)
        cpu_times.append(time.process_time() - cpu_started)
    summary = summarize(result)
    print(f"jobs {len(workload.jobs)} (skipped {workload.skipped_total}) on {len(nodes)} nodes × 8 GPUs")
    print(f"workload built in {build_s:.2f} s")
    print(
        f"simulate ({args.policy}): median {statistics.median(times):.2f} s over {args.repeat}: "
        + ", ".join(f"{t:.2f}" for t in times)
        + f"; CPU time median {statistics.median(cpu_times):.2f} s (the figure to compare on a shared machine)"
    )
    loadavg = Path("/proc/loadavg")
    if loadavg.exists():
        print(f"load average {' '.join(loadavg.read_text().split()[:3])}")
    print(
        f"cycles {result.cycles}, utilization {summary.utilization:.3f}, avg JCT {summary.avg_jct_s / 3600:.2f} h, "
        f"avg wait {summary.avg_wait_s / 3600:.2f} h, makespan {summary.makespan_s / 86400:.1f} d, "
        f"preemptions {summary.preemptions}"
    )


if __name__ == "__main__":
    main()
