"""Prometheus metrics: counters kept as things happen, gauges read from state at scrape time."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from corral.head.runtime import HeadRuntime
from corral.head.services.idle import flagged_jobs
from corral.head.store.tables import GpuClaimRow, JobRow, NodeRow
from corral.model import EPSILON, JobState, NodeState
from corral.obs import metric_names as names

WAIT_BUCKETS = (0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)
IDLE_GPUS = "corral_job_idle_gpus"
_GPU_STATES = ("allocated", "free", "unavailable")
CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class HeadMetrics:
    """One registry per head, so several heads in one process (tests) do not mix their numbers."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.queue_wait = Histogram(
            names.QUEUE_WAIT,
            "Seconds from submit to the start of each job's first attempt",
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.cycle = Histogram(
            names.SCHEDULER_CYCLE,
            "Seconds per scheduling cycle (load, decide, apply)",
            buckets=CYCLE_BUCKETS,
            registry=self.registry,
        )

    def watch(self, rt: HeadRuntime) -> None:
        """Read the head's state at every scrape, and count what happens from now on."""
        self.registry.register(_StateCollector(rt))
        rt.on_job_start = self.queue_wait.observe
        rt.on_cycle = self.cycle.observe

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, rt: HeadRuntime) -> None:
        self.rt = rt

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self.rt.clock.now()
        with self.rt.read() as session:
            by_state = dict(session.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all())
            nodes = list(session.scalars(select(NodeRow)))
            claims = session.execute(
                select(
                    GpuClaimRow.node, GpuClaimRow.gpu_index, GpuClaimRow.fraction, GpuClaimRow.job_id, JobRow.team
                ).join(JobRow, JobRow.id == GpuClaimRow.job_id)
            ).all()
        jobs = GaugeMetricFamily(names.JOBS, "Jobs by state", labels=["state"])
        for state in JobState:
            jobs.add_metric([state.value], float(by_state.get(state.value, 0)))
        yield jobs
        held: dict[tuple[str, int], list[tuple[float, str, str]]] = {}  # GPU → (fraction, job, team) of each claim
        for claim in claims:
            held.setdefault((claim.node, claim.gpu_index), []).append((claim.fraction, claim.job_id, claim.team))
        yield from self._gpus(nodes, held)
        yield from self._nodes(nodes, now)
        yield from self._dcgm(nodes, held)
        yield self._idle()
        fragmented = GaugeMetricFamily(
            names.GPUS_FRAGMENTED,
            "Free GPUs that cannot serve the largest pending request, as of the last scheduling cycle",
            labels=["type"],
        )
        last = self.rt.fragmented_gpus  # empty after a cycle with nothing waiting: nothing is fragmented
        for gpu_type in sorted({gpu["type"] for node in nodes for gpu in node.gpus} | last.keys()):
            fragmented.add_metric([gpu_type], last.get(gpu_type, 0.0))
        yield fragmented

    def _idle(self) -> GaugeMetricFamily:
        with self.rt.read() as session:
            flagged = flagged_jobs(session)
        idle = GaugeMetricFamily(
            IDLE_GPUS, "GPUs of running jobs flagged idle (under 5% utilization)", labels=["job", "user", "team"]
        )
        for job_id, (gpus, user, team) in sorted(flagged.items()):
            idle.add_metric([job_id, user, team], float(gpus))
        return idle

    def _gpus(
        self, nodes: list[NodeRow], held: dict[tuple[str, int], list[tuple[float, str, str]]]
    ) -> Iterator[GaugeMetricFamily]:
        counts: Counter[tuple[str, str]] = Counter()
        by_team: defaultdict[tuple[str, str], float] = defaultdict(float)  # a shared GPU: each team by its fraction
        for node in nodes:
            for gpu in node.gpus:
                claims = held.get((node.name, gpu["index"]), [])
                if sum(fraction for fraction, _, _ in claims) > EPSILON:
                    counts[(gpu["type"], "allocated")] += 1
                    for fraction, _, team in claims:
                        by_team[(gpu["type"], team)] += fraction
                elif node.state == NodeState.READY.value:
                    counts[(gpu["type"], "free")] += 1
                else:
                    counts[(gpu["type"], "unavailable")] += 1
        gpus = GaugeMetricFamily(
            names.GPUS, "GPUs by type and state (allocated, free, unavailable)", labels=["type", "state"]
        )
        for gpu_type in sorted({gpu_type for gpu_type, _ in counts}):  # every state of each type, 0 included
            for state in _GPU_STATES:
                gpus.add_metric([gpu_type, state], float(counts[(gpu_type, state)]))
        yield gpus
        teams = GaugeMetricFamily(
            names.GPUS_ALLOCATED_BY_TEAM, "Allocated GPUs by type and team", labels=["type", "team"]
        )
        for (gpu_type, team), share in sorted(by_team.items()):
            teams.add_metric([gpu_type, team], round(share, 6))
        yield teams

    def _nodes(self, nodes: list[NodeRow], now: datetime) -> Iterator[GaugeMetricFamily]:
        ready = GaugeMetricFamily(names.NODE_READY, "1 if the node is READY", labels=["node", "state"])
        lag = GaugeMetricFamily(names.HEARTBEAT_LAG, "Seconds since the node's last heartbeat", labels=["node"])
        for node in sorted(nodes, key=lambda n: n.name):
            ready.add_metric([node.name, node.state], 1.0 if node.state == NodeState.READY.value else 0.0)
            if node.last_heartbeat is not None:
                lag.add_metric([node.name], max(0.0, (now - node.last_heartbeat).total_seconds()))
        yield ready
        yield lag

    def _dcgm(
        self, nodes: list[NodeRow], held: dict[tuple[str, int], list[tuple[float, str, str]]]
    ) -> Iterator[GaugeMetricFamily]:
        labels = ["node", "gpu", "type", "job", "team"]  # a shared GPU's jobs and teams, comma-separated
        families = {
            "utilization": GaugeMetricFamily(names.GPU_UTIL, "GPU utilization (%)", labels=labels),
            "memory_used_mb": GaugeMetricFamily(names.GPU_MEMORY_USED, "GPU memory used (MiB)", labels=labels),
            "temperature_c": GaugeMetricFamily(names.GPU_TEMPERATURE, "GPU temperature (C)", labels=labels),
            "power_w": GaugeMetricFamily(names.GPU_POWER, "GPU power draw (W)", labels=labels),
            "ecc_uncorrectable": GaugeMetricFamily(
                names.GPU_ECC_UNCORRECTABLE, "Uncorrectable ECC errors", labels=labels
            ),
            "xid_errors": GaugeMetricFamily(names.GPU_XID_ERRORS, "XID errors seen by the agent", labels=labels),
        }
        types = {(n.name, g["index"]): g["type"] for n in nodes for g in n.gpus}
        # A node lost (or gone) measures nothing any more: its last readings would read as current.
        heard = {n.name for n in nodes if n.state != NodeState.NOT_READY.value}
        for (node, index), reading in sorted(self.rt.samples.latest().items()):
            if node not in heard:
                continue
            claims = held.get((node, index), [])
            job = ",".join(sorted({job for _, job, _ in claims}))
            team = ",".join(sorted({team for _, _, team in claims}))
            values = [node, str(index), types.get((node, index), ""), job, team]
            for field, family in families.items():
                family.add_metric(values, float(getattr(reading.sample, field)))
        yield from families.values()
