"""``corral cancel``: end jobs at once; a job that has already ended is left as it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from corral.cli.context import api
from corral.cli.jobs import TERMINAL
from corral.cli.render import emit_json, output_option
from corral.client.calls import HeadApi
from corral.client.errors import NotFoundError

ONE_BY_ONE_MAX = 20  # up to this many jobs, ask for each one's state; beyond it, list the jobs not yet ended
ACTIVE_LIMIT = 100_000


def ended_before(client: HeadApi, ids: Sequence[str]) -> set[str]:
    """The jobs among ``ids`` that had already ended before this cancel, so that one a user cancelled before
    is told apart from one cancelled now. An unknown id is left to the cancel request, which names it."""
    if len(ids) <= ONE_BY_ONE_MAX:
        ended = set()
        for job_id in ids:
            try:
                if client.job(job_id)["state"] in TERMINAL:
                    ended.add(job_id)
            except NotFoundError:
                continue
        return ended
    active = client.jobs(include_all=True, states=["PENDING", "RUNNING"], limit=ACTIVE_LIMIT)
    if len(active) >= ACTIVE_LIMIT:
        return set()  # more jobs wait or run than one list holds: tell only by the state after the cancel
    waiting = {job["id"] for job in active}
    return {job_id for job_id in ids if job_id not in waiting}


def outcome(job: dict[str, Any], ended: set[str]) -> dict[str, Any]:
    """The job object with ``already_ended``: true where the job had ended before (it was left as it is)."""
    return {**job, "already_ended": job["id"] in ended or job["state"] != "CANCELLED"}


@click.command()
@click.argument("job_ids", metavar="JOB...", nargs=-1, required=True)
@output_option
def cancel(job_ids: tuple[str, ...], output: str) -> None:
    """Cancel jobs: their processes get SIGTERM, then SIGKILL after the grace period.

    A job that has already ended is left as it is (`already ended STATE`; with -o json each job
    object has "already_ended": true). All or none: when a JOB is unknown, no job is cancelled
    (exit 4, naming each unknown id).
    """
    ids = list(dict.fromkeys(job_ids))
    client = api(timeout_s=30.0 + len(ids) / 100)  # thousands of jobs end in one transaction
    ended = ended_before(client, ids)
    rows = [outcome(job, ended) for job in client.cancel(ids)]
    if output == "json":
        emit_json(rows)
        return
    for job in rows:
        note = f"already ended {job['state']}" if job["already_ended"] else "cancelled"
        click.echo(f"{job['id']}: {note}")
