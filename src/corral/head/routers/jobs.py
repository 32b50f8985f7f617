"""/v1/jobs: submit, list, show, cancel, preempt, checkpoint, logs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import StreamingResponse

from corral.api import CancelOut, CheckpointDone, JobIds, JobOut, SubmitBatch, SubmitBatchOut, WhyOut
from corral.head.routers.deps import Runtime, User
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal
from corral.head.services import jobs as service
from corral.head.services import logs, preemption
from corral.head.services import why as explain
from corral.head.services.common import Infeasible
from corral.model import JobState
from corral.spec import JobSpec

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
STATE_NAMES = ", ".join(s.value for s in JobState)


@router.post("", status_code=201, response_model=JobOut)
def submit(
    spec: JobSpec,
    rt: Runtime,
    who: User,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JobOut:
    """Submit one job. A repeated `Idempotency-Key` returns the job the first request made (200)."""
    out, created = service.submit(rt, who, spec, idempotency_key)
    if not created:
        response.status_code = 200
    return out


@router.post("/batch", status_code=201, response_model=SubmitBatchOut)
def submit_batch(
    batch: SubmitBatch,
    rt: Runtime,
    who: User,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> SubmitBatchOut:
    """Submit many jobs in one request: all are accepted, or none. With an `Idempotency-Key` the batch
    holds one job (such as an array), and a repeat returns the ids the first request made (200)."""
    ids, created = service.submit_many(rt, who, batch.jobs, idempotency_key)
    if not created:
        response.status_code = 200
    return SubmitBatchOut(ids=ids)


@router.get("", response_model=list[JobOut])
def list_jobs(
    rt: Runtime,
    who: User,
    all: Annotated[bool, Query(description="include jobs that finished more than a day ago")] = False,
    state: Annotated[list[str] | None, Query(description=f"only these states: {STATE_NAMES}")] = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
) -> list[JobOut]:
    states = [s.upper() for s in state or []]
    bad = [s for s in states if s not in JobState.__members__]
    if bad:
        raise Infeasible("state", f"unknown state {bad[0]!r}; valid states are {STATE_NAMES}", "query")
    return service.list_jobs(rt, who, all, states, limit)


@router.get("/{job_id}", response_model=JobOut)
def show(job_id: str, rt: Runtime, who: User) -> JobOut:
    return service.show(rt, who, job_id)


@router.post("/{job_id}/cancel", response_model=CancelOut)
def cancel(job_id: str, rt: Runtime, who: User) -> CancelOut:
    return service.cancel(rt, who, [job_id])[0]


@router.get("/{job_id}/why", response_model=WhyOut)
def why(job_id: str, rt: Runtime, who: User) -> WhyOut:
    """Why the job waits: its reason, and which check each node fails, grouped by verdict."""
    return explain.explain_job(rt, who, job_id)


@router.post("/{job_id}/preempt", response_model=JobOut)
def preempt(job_id: str, rt: Runtime, who: User) -> JobOut:
    """Admin only: stop a running job (SIGTERM, grace period, SIGKILL) and queue it again."""
    return preemption.preempt_jobs(rt, who, [job_id])[0]


@router.post("/{job_id}/checkpoint", response_model=JobOut)
def checkpoint(job_id: str, rt: Runtime, who: User, body: CheckpointDone | None = None) -> JobOut:
    """The job saved a checkpoint: preemption prefers victims that lose the least work since theirs."""
    return preemption.checkpoint_done(rt, who, job_id, body.at if body else None)


@router.post("/cancel", response_model=list[CancelOut])
def cancel_many(ids: JobIds, rt: Runtime, who: User) -> list[CancelOut]:
    """Cancel every job given, or none: an unknown id is answered 404 naming each unknown one."""
    return service.cancel(rt, who, ids.ids, whole_arrays=ids.whole_arrays)


@router.post("/preempt", response_model=list[JobOut])
def preempt_many(ids: JobIds, rt: Runtime, who: User) -> list[JobOut]:
    """Admin only: preempt every job given, or none: an unknown id (404) or a job that does not run
    (409) refuses the whole request, naming each such job."""
    return preemption.preempt_jobs(rt, who, ids.ids)


@router.get("/{job_id}/logs")
async def job_logs(
    job_id: str,
    rt: Runtime,
    who: User,
    rank: Annotated[int, Query(ge=0)] = 0,
    offset: Annotated[int, Query(ge=0)] = 0,
    follow: bool = False,
) -> StreamingResponse:
    """A rank's stdout and stderr (latest attempt); with `follow`, streamed until the job ends."""
    job = await asyncio.to_thread(service.show, rt, who, job_id)
    logs.check_rank(job.nodes, _processes(job), rank)
    return StreamingResponse(_stream(rt, who, job, rank, offset, follow), media_type="text/plain; charset=utf-8")


def _processes(job: JobOut) -> int:
    gpus = job.gpus_per_node
    return int(gpus) if job.launcher == "per-gpu" and gpus >= 1 else 1


async def _stream(
    rt: HeadRuntime, who: Principal, job: JobOut, rank: int, offset: int, follow: bool
) -> AsyncIterator[bytes]:
    generation = max((t.generation for t in job.tasks), default=0)
    found = logs.latest_log(rt, job.id, generation, rank)
    path = None if found is None else found[1]
    if found is not None and found[0] != generation:  # only an earlier attempt has printed anything yet
        if offset == 0:
            yield (
                f"--- attempt {found[0]}'s output: attempt {generation} (restart {job.restarts})"
                " has printed nothing yet ---\n"
            ).encode()
        generation = found[0]  # followed, the stream moves on to the newest attempt when this one is read
    while True:
        chunk = logs.read_from(path, offset)
        if chunk:
            offset += len(chunk)
            yield chunk
            continue
        if not follow or rt.stopping:  # a stopping head ends the stream; the client says so
            return
        job = await asyncio.to_thread(service.show, rt, who, job.id)
        newest = max((t.generation for t in job.tasks), default=generation)
        if newest != generation:
            generation, path, offset = newest, None, 0
            yield f"\n--- attempt {newest} (restart {job.restarts}) ---\n".encode()
        if path is None:
            found = logs.latest_log(rt, job.id, generation, rank)
            if found is not None and found[0] == generation:  # not an older attempt's: wait for this one's own
                path = found[1]
        if JobState(job.state).terminal and all(t.state in ("EXITED", "LOST") for t in job.tasks):
            chunk = logs.read_from(path, offset)
            if chunk:
                yield chunk
            return
        await asyncio.sleep(0.2)
