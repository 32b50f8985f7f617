"""The head and the simulator run the same scheduler: one scenario, both ways, the same placements.

The head is real (its API, database and scheduling cycle on a fake clock) with agents simulated
through the agent API; the simulator replays the same jobs on the same cluster. Every job must
start at the same moment on the same nodes in both. The second scenario mixes GPU types under a
speed table (the head's config, the simulator's cluster file): jobs wait for a faster type they
prefer when the running jobs' time limits say it frees up soon enough."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from corral.head.services.scheduling import run_cycle
from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, load_cluster, prepare, simulate

from .conftest import exited, running

GPUS_PER_NODE = 4


@dataclass(frozen=True)
class Scenario:
    groups: tuple[tuple[str, int, str], ...]  # name, nodes, GPU type (GPUS_PER_NODE GPUs each)
    # id, submit (s), duration (s) at speed 1.0, GPUs, GPU types ("A|B"), time limit (s, 0 = none);
    # distinct moments, so no two events tie
    jobs: tuple[tuple[str, int, int, int, str, int], ...]
    speed: tuple[tuple[str, float], ...] = ()

    @property
    def nodes(self) -> dict[str, str]:
        """Node name → its GPU type, in name order."""
        return {f"{g}-{i:04d}": t for g, count, t in self.groups for i in range(count)}

    def run_s(self, duration: float, gpu_type: str) -> float:
        return duration / dict(self.speed).get(gpu_type, 1.0)


SAME = Scenario(
    groups=(("g", 3, "H100"),),
    jobs=(
        ("a", 0, 100, 4, "", 0),
        ("b", 10, 50, 2, "", 0),
        ("c", 20, 300, 8, "", 0),
        ("d", 30, 41, 1, "", 0),
        ("e", 35, 63, 4, "", 0),
        ("f", 45, 207, 2, "", 0),
        ("g", 51, 33, 1, "", 0),
        ("h", 57, 121, 4, "", 0),
        ("i", 63, 17, 3, "", 0),
        ("j", 71, 250, 8, "", 0),
    ),
)
MIXED = Scenario(
    groups=(("a", 2, "A100"), ("h", 1, "H100")),
    jobs=(
        ("a", 0, 100, 4, "H100", 150),  # on the H100 until 100; its limit says 150
        ("b", 10, 300, 4, "H100|A100", 400),  # waits: 140 + 400 < 400 / 0.5
        ("c", 20, 50, 2, "A100|H100", 200),  # its first choice is free
        ("d", 31, 103, 4, "H100|A100", 150),  # waits for the H100 too; once b has it, the A100s are sooner
        ("e", 45, 61, 4, "", 0),  # any type: the free A100s
        ("f", 53, 37, 2, "H100|A100", 0),  # no time limit, no history: runs where it fits now
        ("g", 67, 29, 2, "H100|A100", 3000),  # waiting is slower than 2 A100 now
    ),
    speed=(("H100", 1.0), ("A100", 0.5)),
)


def simulated(tmp_path: Any, scenario: Scenario, policy: str) -> dict[str, tuple[float, tuple[str, ...]]]:
    cluster = tmp_path / "cluster.yaml"
    groups = "".join(
        f"  - {{name: {g}, count: {count}, gpus_per_node: {GPUS_PER_NODE}, gpu_type: {t}}}\n"
        for g, count, t in scenario.groups
    )
    speed = "".join(f"  {t}: {v}\n" for t, v in scenario.speed)
    cluster.write_text(f"node_groups:\n{groups}" + (f"gpu_speed:\n{speed}" if speed else ""))
    spec = load_cluster(cluster)
    nodes = build_nodes(spec)
    assert tuple(n.name for n in nodes) == tuple(sorted(scenario.nodes))
    trace = Trace(
        jobs=tuple(
            TraceJob(
                id=i,
                submit_s=s,
                duration_s=d,
                gpus=g,
                gpu_types=tuple(filter(None, t.split("|"))),
                time_limit_s=lim or None,
            )
            for i, s, d, g, t, lim in scenario.jobs
        )
    )
    result = simulate(prepare(trace, nodes), nodes, get_policy(policy), spec.gpu_speed)
    return {r.id: (r.start_s, tuple(sorted(r.nodes))) for r in result.records}


def on_the_head(head: Any, scenario: Scenario, policy: str) -> dict[str, tuple[float, tuple[str, ...]]]:
    agents = {
        name: head.register(name, gpus=GPUS_PER_NODE, gpu_type=t, labels={"group": name[:-5], "gpu_type": t})
        for name, t in scenario.nodes.items()
    }
    duration = {trace_id: float(d) for trace_id, _, d, _, _, _ in scenario.jobs}
    started: dict[str, tuple[float, tuple[str, ...]]] = {}
    ends: dict[str, float] = {}  # started job → when its run ends
    live: dict[str, list[dict[str, Any]]] = {name: [] for name in agents}  # node → the tasks it runs
    ids: dict[str, str] = {}  # head job id → trace id
    waiting = list(scenario.jobs)
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
            trace_id, _, _, gpus, types, limit = waiting.pop(0)
            nodes = -(-gpus // GPUS_PER_NODE)
            resources: dict[str, Any] = {"gpus": gpus // nodes}
            if types:
                resources["gpu_type"] = types.split("|")
            spec = {"name": trace_id, "command": "x", "nodes": nodes, "resources": resources}
            if limit:
                spec["time_limit"] = limit
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
                        ends[trace_id] = now + scenario.run_s(duration[trace_id], scenario.nodes[name])
                agent.beat([{**running(t), "master_port": 29500} for t in live[name]])
    return started


@pytest.mark.parametrize("policy", ["fifo", "priority", "default"])
def test_the_head_places_every_job_when_and_where_the_simulator_does(head, tmp_path, policy):
    expected = simulated(tmp_path, SAME, policy)
    assert len(expected) == len(SAME.jobs)
    assert on_the_head(head, SAME, policy) == expected


@pytest.mark.parametrize("policy", ["fifo", "priority", "default"])
def test_the_same_with_mixed_gpu_types_and_a_speed_table(tmp_path, clock, start_head, policy):
    expected = simulated(tmp_path, MIXED, policy)
    assert len(expected) == len(MIXED.jobs)
    config = tmp_path / "corral.yaml"
    config.write_text("gpu_speed: {" + ", ".join(f"{t}: {v}" for t, v in MIXED.speed) + "}\n")
    with start_head(tmp_path / "home", clock, config_path=config) as head:
        assert on_the_head(head, MIXED, policy) == expected
    # Some job waited for the faster type: a first start later than its submit with a GPU free then.
    assert expected["b"][0] == 100 and expected["b"][1] == ("h-0000",)
