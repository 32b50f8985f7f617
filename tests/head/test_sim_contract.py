"""The head and the simulator run the same scheduler: one scenario, both ways, the same placements.

The head is real (its API, database and scheduling cycle on a fake clock) with agents simulated
through the agent API; the simulator replays the same jobs on the same cluster. Every job must
start at the same moment on the same nodes in both. The second scenario mixes GPU types under a
speed table (the head's config, the simulator's cluster file): jobs wait for a faster type they
prefer when the running jobs' time limits say it frees up soon enough. The third has users whose
finished jobs were short or long, and a job that passes 2 GPU-hours of service and is preempted by
a newer one under ``default``. The fourth has jobs on fractions of a GPU, which share GPUs, among
whole-GPU jobs. Jobs are preemptible (as every traced job is to the simulator); a
stopped task exits at once, and a cycle runs whenever a running job crosses one of the policy's
service thresholds, as the simulator re-plans then."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from corral.head.services.scheduling import run_cycle
from corral.sched import get_policy
from corral.sim import Trace, TraceJob, build_nodes, load_cluster, prepare, simulate

from .conftest import exited, running

GPUS_PER_NODE = 4
USER, TEAM = "ann", "default"  # a job's owner, unless the scenario names another; the head's default team


@dataclass(frozen=True)
class Scenario:
    groups: tuple[tuple[str, int, str], ...]  # name, nodes, GPU type (GPUS_PER_NODE GPUs each)
    # id, submit (s), duration (s) at speed 1.0, GPUs (a fraction below 1 shares a GPU), GPU types ("A|B"),
    # time limit (s, 0 = none); distinct moments, so no two events tie
    jobs: tuple[tuple[str, int, int, float, str, int], ...]
    speed: tuple[tuple[str, float], ...] = ()
    owners: tuple[tuple[str, str], ...] = ()  # job id → its user, where not USER (all in one team)

    def user(self, job: str) -> str:
        return dict(self.owners).get(job, USER)

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

HISTORY = Scenario(  # under default: finished jobs make estimates, and a long job is demoted
    groups=(("g", 3, "H100"),),
    jobs=(
        ("s1", 0, 100, 4, "", 0),  # sam's finished job: 400 GPU-s
        ("l1", 2, 600, 8, "", 0),  # lou's: 4,800 GPU-s
        ("d", 110, 4000, 4, "", 0),  # lou's, estimated from the team (only sam's job ended yet)
        ("p1", 700, 1500, 4, "", 0),  # sam's
        ("p2", 705, 1500, 4, "", 0),  # sam's
        ("q", 1000, 500, 4, "", 0),  # lou's: estimated long, waits
        ("r", 1100, 300, 4, "", 0),  # sam's: estimated short, ahead of q; preempts d once d is demoted (1910)
    ),
    owners=(("s1", "sam"), ("l1", "lou"), ("d", "lou"), ("p1", "sam"), ("p2", "sam"), ("q", "lou"), ("r", "sam")),
)

SHARED = Scenario(  # fractions pack onto shared GPUs; a GPU holding one is not free for a whole-GPU job
    groups=(("g", 2, "H100"),),
    jobs=(
        ("a", 0, 100, 4, "", 0),  # g-0000
        ("b", 10, 203, 0.5, "", 0),  # an empty GPU of g-0001
        ("c", 20, 151, 0.25, "", 0),  # shares b's GPU
        ("d", 30, 121, 3, "", 0),  # the other three of g-0001
        ("e", 40, 93, 0.5, "", 0),  # b's GPU has 0.25 left: waits for an empty one
        ("f", 55, 67, 1, "", 0),
        ("g", 65, 81, 0.25, "", 0),  # fills b's GPU, unless the order is strict
        ("h", 75, 107, 2, "", 0),
        ("i", 85, 53, 0.5, "", 0),
        ("j", 95, 71, 0.75, "", 0),
    ),
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
                user=scenario.user(i),
                vc=TEAM,
            )
            for i, s, d, g, t, lim in scenario.jobs
        )
    )
    result = simulate(prepare(trace, nodes), nodes, get_policy(policy), spec.gpu_speed)
    return {r.id: (r.start_s, tuple(sorted(r.nodes))) for r in result.records}


@dataclass
class Runs:
    """What the driver knows of the jobs it started on the head, by trace id."""

    started: dict[str, tuple[float, tuple[str, ...]]] = field(default_factory=dict)  # first start, last run's nodes
    run_start: dict[str, float] = field(default_factory=dict)  # running job → when its current run began
    ends: dict[str, float] = field(default_factory=dict)  # running job → when its run ends
    work: dict[str, float] = field(default_factory=dict)  # seconds of work left at speed 1.0
    attained: dict[str, float] = field(default_factory=dict)  # GPU-seconds of its ended runs

    def start(self, job: str, node: str, now: float, run_s: float) -> None:
        if job not in self.ends:  # a new run
            self.run_start[job], self.ends[job] = now, now + run_s
            self.started[job] = (self.started.get(job, (now, ()))[0], ())
        first, nodes = self.started[job]
        self.started[job] = (first, tuple(sorted({*nodes, node})))

    def stop(self, job: str, now: float, gpus: float, speed: float) -> None:
        """Preempted: the work done so far is kept (continuous checkpoints, as the simulator's default)."""
        if job in self.ends:
            elapsed = now - self.run_start.pop(job)
            del self.ends[job]
            self.work[job] -= elapsed * speed
            self.attained[job] = self.attained.get(job, 0.0) + elapsed * gpus

    def crossings(self, gpus: dict[str, float], thresholds: tuple[float, ...]) -> list[float]:
        """When running jobs cross the policy's service thresholds (the simulator re-plans then)."""
        out = []
        for job, began in self.run_start.items():
            out += [began + (t - self.attained.get(job, 0.0)) / gpus[job] for t in thresholds]
        return out


def on_the_head(head: Any, scenario: Scenario, policy: str) -> dict[str, tuple[float, tuple[str, ...]]]:
    agents = {
        name: head.register(name, gpus=GPUS_PER_NODE, gpu_type=t, labels={"group": name[:-5], "gpu_type": t})
        for name, t in scenario.nodes.items()
    }
    gpus = {trace_id: g for trace_id, _, _, g, _, _ in scenario.jobs}
    tokens = {user: head.user_token(user) for user in sorted({scenario.user(j[0]) for j in scenario.jobs})}
    thresholds = get_policy(policy).thresholds
    runs = Runs(work={trace_id: float(d) for trace_id, _, d, _, _, _ in scenario.jobs})
    live: dict[str, list[dict[str, Any]]] = {name: [] for name in agents}  # node → the tasks it runs
    ids: dict[str, str] = {}  # head job id → trace id
    waiting = list(scenario.jobs)
    now = 0.0
    while waiting or runs.ends:
        ahead = [m for m in runs.crossings(gpus, thresholds) if m > now]
        moment = min([float(waiting[0][1])] if waiting else [], default=float("inf"))
        moment = min(moment, *runs.ends.values(), *ahead) if runs.ends else moment
        head.clock.advance(moment - now)
        now = moment
        ending = {job for job, end in runs.ends.items() if end == now}
        for name, agent in agents.items():  # every node reports (and is heard from) at every moment
            agent.beat([exited(t, 0) if ids[t["job_id"]] in ending else running(t) for t in live[name]])
            live[name] = [t for t in live[name] if ids[t["job_id"]] not in ending]
        for job in ending:
            del runs.ends[job], runs.run_start[job]
        while waiting and waiting[0][1] == now:
            trace_id, _, _, count, types, limit = waiting.pop(0)
            nodes = max(1, -(-int(count) // GPUS_PER_NODE))
            resources: dict[str, Any] = {"gpus": count // nodes if count >= 1 else count}
            if types:
                resources["gpu_type"] = types.split("|")
            spec = {"name": trace_id, "command": "x", "nodes": nodes, "resources": resources, "preemptible": True}
            if limit:
                spec["time_limit"] = limit
            ids[head.submit(spec, tokens[scenario.user(trace_id)])["id"]] = trace_id
        stopped = True
        while stopped:  # a plan with preemptions is followed by another cycle at the same moment
            run_cycle(head.rt, get_policy(policy))
            stopped = sync(agents, live, ids, runs, scenario, gpus, now)
    return runs.started


def sync(
    agents: dict[str, Any],
    live: dict[str, list[dict[str, Any]]],
    ids: dict[str, str],
    runs: Runs,
    scenario: Scenario,
    gpus: dict[str, float],
    now: float,
) -> bool:
    """Agents start the tasks they are given and stop those taken away (at once); True if any stopped."""
    stopped = False
    for _ in range(2):  # a gang's other ranks are handed out once rank 0 has reported its port
        for name, agent in agents.items():
            wanted = {t["task_id"]: t for t in agent.tasks()}
            gone = [t for t in live[name] if t["task_id"] not in wanted]
            for task in gone:
                job = ids[task["job_id"]]
                runs.stop(job, now, gpus[job], dict(scenario.speed).get(scenario.nodes[name], 1.0))
            live[name] = [t for t in live[name] if t["task_id"] in wanted]
            for task in wanted.values():
                if all(task["task_id"] != t["task_id"] for t in live[name]):
                    live[name].append(task)
                    job = ids[task["job_id"]]
                    runs.start(job, name, now, scenario.run_s(runs.work[job], scenario.nodes[name]))
            agent.beat([exited(t, 143) for t in gone] + [{**running(t), "master_port": 29500} for t in live[name]])
            stopped = stopped or bool(gone)
    return stopped


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


@pytest.mark.parametrize("policy", ["fifo", "priority", "default"])
def test_the_same_with_finished_jobs_and_a_demotion(head, tmp_path, policy):
    expected = simulated(tmp_path, HISTORY, policy)
    assert len(expected) == len(HISTORY.jobs)
    assert on_the_head(head, HISTORY, policy) == expected
    if policy == "default":
        # r (sam: short jobs) went ahead of q (lou: long ones), preempting d once d passed 2 GPU-hours.
        assert expected["r"] == (1910, ("g-0000",)) and expected["q"][0] == 2200
        assert expected["d"] == (110, ("g-0002",))


@pytest.mark.parametrize("policy", ["fifo", "priority", "default"])
def test_the_same_with_jobs_sharing_gpus(head, tmp_path, policy):
    expected = simulated(tmp_path, SHARED, policy)
    assert len(expected) == len(SHARED.jobs)
    assert on_the_head(head, SHARED, policy) == expected
    assert expected["c"] == (20, ("g-0001",))  # on b's GPU, though the GPUs d takes at 30 were free
