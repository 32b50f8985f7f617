"""`corral logs`: a rank's output, optionally followed until the job ends."""

from __future__ import annotations

import sys

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.numbers import PlainIntRange
from corral.client.errors import Unreachable

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")

RANK_RULE = "a rank is a whole number from 0 (the first process) to the job's WORLD_SIZE - 1"


@click.command()
@click.argument("job_id", metavar="JOB", callback=names.JOB)
@click.option("-f", "--follow", is_flag=True, help="keep printing new output until the job ends")
@click.option(
    "--rank",
    type=PlainIntRange(min=0, rule=RANK_RULE),
    default=0,
    show_default=True,
    metavar="R",
    help="which rank's output: 0 (the first process) to WORLD_SIZE - 1",
)
def logs(job_id: str, follow: bool, rank: int) -> None:
    """Print the stdout and stderr of JOB (rank 0 unless --rank), latest attempt."""
    out = sys.stdout.buffer
    client = api()
    for chunk in client.logs(job_id, rank=rank, follow=follow):
        out.write(chunk)
        out.flush()
    if follow:
        state = client.job(job_id)["state"]
        if state not in TERMINAL_STATES:  # the head ended the stream early: it is stopping
            raise Unreachable(
                f"the head stopped streaming before job {job_id} ended (it is {state}): it is stopping or"
                " restarting; run the command again once it is back"
            )
