"""The head and the simulator run the same scheduler: one scenario, both ways, the same placements.

The head is real (its API, database and scheduling cycle on a fake clock) with agents simulated
through the agent API; the simulator replays the same jobs on the same cluster. Every job must
start at the same moment on the same nodes in both."""

from __future__ import annotations

from typing import Any

import pytest

from corral.head.services.scheduling import run_cycle
from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, load_cluster, prepare, simulate

from .conftest import exited, running

GPUS_PER_NODE = 4
NODES = ("g-0000", "g-0001", "g-0002")
# id, submit (s), duration (s), GPUs: distinct moments, so no two events tie
JOBS = (
    ("a", 0, 100, 4),
    ("b", 10, 50, 2),
    ("c", 20, 300, 8),
    ("d", 30, 41, 1),
    ("e", 35, 63, 4),
    ("f", 45, 207, 2),
    ("g", 51, 33, 1),
    ("h", 57, 121, 4),
    ("i", 63, 17, 3),
    ("j", 71, 250, 8),
)


def simulated(tmp_path: Any, policy: str) -> dict[str, tuple[float, tuple[str, ...]]]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        f"node_groups:\n  - {{name: g, count: {len(NODES)}, gpus_per_node: {GPUS_PER_NODE}, gpu_type: H100}}\n"
    )
    nodes = build_nodes(load_cluster(cluster))
    assert tuple(n.name for n in nodes) == NODES
    trace = Trace(jobs=tuple(TraceJob(id=i, submit_s=s, duration_s=d, gpus=g) for i, s, d, g in JOBS))
    result = simulate(prepare(trace, nodes), nodes, get_policy(policy))
    return {r.id: (r.start_s, tuple(sorted(r.nodes))) for r in result.records}


def on_the_head(head: Any, policy: str) -> dict[str, tuple[float, tuple[str, ...]]]:
    labels = {"group": "g", "gpu_type": "H100"}
    agents = {name: head.register(name, gpus=GPUS_PER_NODE, labels=labels) for name in NODES}
    duration = {trace_id: float(d) for trace_id, _, d, _ in JOBS}
    started: dict[str, tuple[float, tuple[str, ...]]] = {}
    ends: dict[str, float] = {}  # started job → when its run ends
    live: dict[str, list[dict[str, Any]]] = {name: [] for name in NODES}  # node → the tasks it runs
    ids: dict[str, str] = {}  # head job id → trace id
    waiting = list(JOBS)
    now = 0.0
    while waiting or ends:
        moment = min([float(waiting[0][1])] if waiting else [], default=float("inf"))
        moment = min(moment, *ends.values()) if ends else moment
        head.clock.advance(moment - now)
        now = moment
        ending = {job for job, end in ends.items() if end == now}
        for name, agent in agents.items():  # every node reports (and is heard from) at every moment
            agent.beat([exited(t, 0) if ids[t["job_id"]] in ending else running(t) for t in live[name]])
            live[name] = [t for t in live[name] if ids[t["job_id"]] not in ending]
        for job in ending:
            del ends[job]
        while waiting and waiting[0][1] == now:
            trace_id, _, _, gpus = waiting.pop(0)
            nodes = -(-gpus // GPUS_PER_NODE)
            spec = {"name": trace_id, "command": "x", "nodes": nodes, "resources": {"gpus": gpus // nodes}}
            ids[head.submit(spec)["id"]] = trace_id
        run_cycle(head.rt, get_policy(policy))
        for _ in range(2):  # a gang's other ranks are handed out once rank 0 has reported its port
            for name, agent in agents.items():
                for task in agent.tasks():
                    if all(task["task_id"] != t["task_id"] for t in live[name]):
                        live[name].append(task)
                        trace_id = ids[task["job_id"]]
                        placed = started.get(trace_id, (now, ()))[1]
                        started[trace_id] = (now, tuple(sorted({*placed, name})))
                        ends[trace_id] = now + duration[trace_id]
                agent.beat([{**running(t), "master_port": 29500} for t in live[name]])
    return started


@pytest.mark.parametrize("policy", ["fifo", "priority", "default"])
def test_the_head_places_every_job_when_and_where_the_simulator_does(head, tmp_path, policy):
    expected = simulated(tmp_path, policy)
    assert len(expected) == len(JOBS)
    assert on_the_head(head, policy) == expected
