"""Trace-driven simulation: replay a job trace on a virtual cluster with ``corral.sched`` unchanged."""

from corral.sim.cluster import build_nodes, load_cluster
from corral.sim.engine import simulate
from corral.sim.metrics import Summary, percentile, summarize
from corral.sim.result import JobRecord, SimResult
from corral.sim.trace import NEVER_RAN, NO_GPUS, Trace, TraceError, TraceJob, load_trace, parse_window, read_trace
from corral.sim.workload import EPOCH, NEVER_FITS, SimJob, Workload, gang_request, prepare

__all__ = [
    "EPOCH",
    "NEVER_FITS",
    "NEVER_RAN",
    "NO_GPUS",
    "JobRecord",
    "SimJob",
    "SimResult",
    "Summary",
    "Trace",
    "TraceError",
    "TraceJob",
    "Workload",
    "build_nodes",
    "gang_request",
    "load_cluster",
    "load_trace",
    "parse_window",
    "percentile",
    "prepare",
    "read_trace",
    "simulate",
    "summarize",
]
