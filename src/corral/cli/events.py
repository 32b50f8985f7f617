"""`corral events`: the cluster's state changes, optionally followed as they happen."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.render import emit_json, output_option, table

FOLLOW_WAIT_S = 20.0
MAX_EVENTS = 10_000  # the most the head answers in one request


def _checked_limit(value: int) -> int:
    if not 1 <= value <= MAX_EVENTS:
        raise click.BadParameter(f"must be from 1 to {MAX_EVENTS:,} (the most events shown at once), got {value}")
    return value


def _line(event: dict[str, Any]) -> str:
    subject = event.get("job_id") or event.get("node") or "-"
    return f"{event['ts']}  {event['kind']:<18} {subject:<12} {event['message']}"


@click.command()
@click.option("-f", "--follow", is_flag=True, help="keep printing new events as they happen (Ctrl-C to stop)")
@click.option("--job", "job_id", metavar="JOB", help="only this job's events", callback=names.JOB)
@click.option(
    "-n",
    "--limit",
    type=int,
    default=50,
    show_default=True,
    callback=lambda _ctx, _param, value: _checked_limit(value),
    help=f"how many of the newest events to show first (1 to {MAX_EVENTS:,})",
)
@output_option
def events(follow: bool, job_id: str | None, limit: int, output: str) -> None:
    """Print the event stream: jobs submitted, placed, started, ended; nodes joining, lost, drained.

    With -o json: a JSON array, or with --follow one JSON object per line.
    """
    client = api(timeout_s=FOLLOW_WAIT_S + 10)
    if job_id is not None:
        client.job(job_id)  # an unknown job (or another user's) is not found: exit 4, as elsewhere
    recent = client.events(after=-1, limit=limit, job=job_id)
    if not follow:
        if output == "json":
            emit_json(recent)
        else:
            table(
                None,
                ["TIME", "KIND", "JOB/NODE", "MESSAGE"],
                [[e["ts"], e["kind"], e.get("job_id") or e.get("node") or "-", e["message"]] for e in recent],
            )
        return
    last = -1
    for event in recent:
        _print(event, output)
        last = event["id"]
    if last < 0:
        last = 0
    while True:
        for event in client.events(after=last, limit=1000, job=job_id, wait_s=FOLLOW_WAIT_S):
            _print(event, output)
            last = event["id"]


def _print(event: dict[str, Any], output: str) -> None:
    sys.stdout.write((json.dumps(event) if output == "json" else _line(event)) + "\n")
    sys.stdout.flush()
