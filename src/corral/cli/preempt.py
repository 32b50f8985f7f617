"""Preemption commands: an admin stops a running job to requeue it; a job reports its checkpoints."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.render import emit_json, output_option
from corral.client.errors import InvalidRequest, NotAllowedError, Unreachable


@click.command()
@click.argument("job_ids", metavar="JOB...", nargs=-1, required=True, callback=names.JOB)
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
@click.argument("job_id", metavar="[JOB]", required=False, callback=names.JOB)
@output_option
def checkpoint_done(job_id: str | None, output: str) -> None:
    """Report that the job saved a checkpoint just now.

    Run it from inside a job after each save (JOB defaults to $CORRAL_JOB_ID). When the
    scheduler must preempt, it prefers the jobs that lose the least work since their last
    checkpoint. Touching $CORRAL_CHECKPOINT_DIR/.corral-checkpoint does the same without a
    command. Only a running job can report one (exit 1 naming the state of any other).
    Inside a job whose node has no client config (no head or token to ask), it touches that
    file instead, and the agent reports it.
    """
    inside = job_id is None and bool(os.environ.get("CORRAL_CHECKPOINT_DIR"))
    job_id = job_id or os.environ.get("CORRAL_JOB_ID")
    if not job_id:
        raise InvalidRequest("JOB: give a job id, or run this inside a job (where CORRAL_JOB_ID is set)")
    try:
        job = api().checkpoint_done(job_id)
    except (Unreachable, NotAllowedError) as exc:
        if not inside:
            raise
        _touch_checkpoint_file(job_id, os.environ["CORRAL_CHECKPOINT_DIR"], output, exc)
        return
    if output == "json":
        emit_json(job)
    else:
        click.echo(f"{job['id']}: checkpoint recorded at {job['last_checkpoint_at']}")


def _touch_checkpoint_file(job_id: str, checkpoint_dir: str, output: str, why: Exception) -> None:
    """Record the checkpoint through the file the agent watches, when the head cannot be asked from here."""
    from corral.agent.tasks import CHECKPOINT_MARKER

    marker = Path(checkpoint_dir) / CHECKPOINT_MARKER
    try:
        marker.touch()  # now, whether it was there or not
    except OSError as exc:
        raise InvalidRequest(f"CORRAL_CHECKPOINT_DIR: cannot touch {marker}: {exc.strerror or exc}") from None
    at = datetime.fromtimestamp(marker.stat().st_mtime, UTC).isoformat().replace("+00:00", "Z")  # as the API writes it
    if output == "json":
        emit_json({"id": job_id, "last_checkpoint_at": at, "recorded_by": str(marker)})
        return
    click.echo(f"{job_id}: checkpoint recorded at {at} in {marker}; the agent reports it")
    click.echo(f"(the head was not asked: {why})", err=True)
