"""``corral cancel``: end jobs at once; a job that has already ended is left as it is."""

from __future__ import annotations

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.render import emit_json, output_option


@click.command()
@click.argument("job_ids", metavar="JOB...", nargs=-1, required=True, callback=names.JOB)
@click.option(
    "--array", "whole_arrays", is_flag=True, help="each JOB stands for its whole array: cancel every element of it"
)
@output_option
def cancel(job_ids: tuple[str, ...], whole_arrays: bool, output: str) -> None:
    """Cancel jobs: their processes get SIGTERM, then SIGKILL after the grace period.

    A job that has already ended is left as it is (`already ended STATE`; with -o json each job
    object has "already_ended": true). All or none: when a JOB is unknown, no job is cancelled
    (exit 4, naming each unknown id). With --array, an array's id (or any element's) cancels
    every element of it.
    """
    ids = list(dict.fromkeys(job_ids))
    # Thousands of jobs end in one transaction; an array may have up to 10,000 elements.
    client = api(timeout_s=min(600.0, 30.0 + len(ids) * (100.0 if whole_arrays else 0.01)))
    rows = client.cancel(ids, whole_arrays=whole_arrays)
    if output == "json":
        emit_json(rows)
        return
    for job in rows:
        note = f"already ended {job['state']}" if job["already_ended"] else "cancelled"
        click.echo(f"{job['id']}: {note}")
