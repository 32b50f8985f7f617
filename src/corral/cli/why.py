"""``corral why JOB``: what the job waits for, node group by node group."""

from __future__ import annotations

from typing import Any

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.render import output_option, render, table

_SHOWN_NODES = 4


def _nodes_text(nodes: list[str]) -> str:
    shown = ", ".join(nodes[:_SHOWN_NODES])
    more = len(nodes) - _SHOWN_NODES
    return f"{len(nodes)}: {shown}" + (f" and {more} more" if more > 0 else "")


def _why_table(out: dict[str, Any]) -> None:
    click.echo(f"{out['job_id']} {out['state']}: {out['reason']}")
    if out["state"] != "PENDING":
        click.echo("it is not waiting; below, where it would fit now if it were submitted again")
    from corral.sched.describe import plural  # the scheduler's package: only when needed

    need = out["nodes_needed"]
    click.echo(f"needs {plural(need, 'node')} that {'fits' if need == 1 else 'fit'} at once")
    table(
        None,
        ["NODES", "CHECK", "VERDICT"],
        [[_nodes_text(g["nodes"]), g["filter"], g["message"]] for g in out["groups"]],
    )


@click.command()
@click.argument("job_id", metavar="JOB", callback=names.JOB)
@output_option
def why(job_id: str, output: str) -> None:
    """Explain why JOB waits: which check each group of nodes fails.

    Checks run in order: state (READY and heard from), runtime (a job with an image
    needs the node's agent to have a container runtime), gpu_type (an acceptable type),
    capacity (could ever hold one node's share), free (has it free now). Nodes that
    pass every check show as `fits`.
    """
    render(output, api().why(job_id), _why_table)
