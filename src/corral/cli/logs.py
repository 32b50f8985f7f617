"""`corral logs`: a rank's output, optionally followed until the job ends."""

from __future__ import annotations

import sys

import click

from corral.cli.context import api


@click.command()
@click.argument("job_id", metavar="JOB")
@click.option("-f", "--follow", is_flag=True, help="keep printing new output until the job ends")
@click.option("--rank", type=int, default=0, show_default=True, help="which rank's output")
def logs(job_id: str, follow: bool, rank: int) -> None:
    """Print the stdout and stderr of JOB (rank 0 unless --rank), latest attempt."""
    out = sys.stdout.buffer
    for chunk in api().logs(job_id, rank=rank, follow=follow):
        out.write(chunk)
        out.flush()
