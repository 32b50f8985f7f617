"""The recent readings of the GPUs a job holds, for the dashboard's job page."""

from __future__ import annotations

from corral.api.usage import GpuSeries, JobGpusOut
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services.jobs import get_row
from corral.head.services.lifecycle import LIVE_TASK_STATES, current_tasks

MAX_POINTS = 120


def job_gpus(rt: HeadRuntime, who: Principal, job_id: str, points: int = MAX_POINTS) -> JobGpusOut:
    live = {s.value for s in LIVE_TASK_STATES}
    with rt.read() as session:
        job = get_row(session, job_id, who)
        held = [(t.node, int(i)) for t in current_tasks(session, job) if t.state in live for i in t.gpus]
    series = []
    for node, index in held:
        readings = rt.samples.series(node, index)[-points:]
        series.append(
            GpuSeries(node=node, index=index, points=[(r.at, r.sample.utilization, r.sample.power_w) for r in readings])
        )
    return JobGpusOut(job_id=job_id, gpus=series)
