"""Preemption commands: an admin stops a running job to requeue it; a job reports its checkpoints."""

from __future__ import annotations

import os

import click

from corral.cli.context import api
from corral.cli.render import emit_json, output_option
from corral.client.errors import InvalidRequest


@click.command()
@click.argument("job_ids", metavar="JOB...", nargs=-1, required=True)
@output_option
def preempt(job_ids: tuple[str, ...], output: str) -> None:
    """Stop running jobs and queue them again (admin only).

    Each job's processes get SIGTERM, then the job's grace period (default 30 s) to save a
    checkpoint, then SIGKILL. The job goes back to PENDING with `restarts` + 1; this does
    not use up its `max_restarts`. All or none: when a JOB is unknown (exit 4) or not
    running (exit 1), no job is preempted.
    """
    rows = api().preempt(job_ids)
    if output == "json":
        emit_json(rows)
        return
    for job in rows:
        click.echo(f"{job['id']}: {job['reason']}")


@click.command("checkpoint-done")
@click.argument("job_id", metavar="[JOB]", required=False)
@output_option
def checkpoint_done(job_id: str | None, output: str) -> None:
    """Report that the job saved a checkpoint just now.

    Run it from inside a job after each save (JOB defaults to $CORRAL_JOB_ID). When the
    scheduler must preempt, it prefers the jobs that lose the least work since their last
    checkpoint. Touching $CORRAL_CHECKPOINT_DIR/.corral-checkpoint does the same without a
    command. Only a running job can report one (exit 1 naming the state of any other).
    """
    job_id = job_id or os.environ.get("CORRAL_JOB_ID")
    if not job_id:
        raise InvalidRequest("JOB: give a job id, or run this inside a job (where CORRAL_JOB_ID is set)")
    job = api().checkpoint_done(job_id)
    if output == "json":
        emit_json(job)
    else:
        click.echo(f"{job['id']}: checkpoint recorded at {job['last_checkpoint_at']}")
