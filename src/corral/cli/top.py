"""`corral top`: a live view of nodes, GPU utilization and the queue."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import click

from corral.cli.context import api
from corral.cli.numbers import FiniteFloatRange
from corral.cli.render import STATE_STYLE, emit_json, output_option, output_width, stdout_console

BLOCKS = " ▁▂▃▄▅▆▇█"


def _gpu_cell(gpu: dict[str, Any], stale: bool = False) -> str:
    """One character per GPU: its utilization as a bar, coloured by who holds it; with ``stale`` (a node
    not heard from), no bar: its last reading may be long past."""
    if not gpu.get("healthy", True):
        return "[bold red]✗[/]"
    utilization = 0.0 if stale else gpu.get("utilization") or 0.0
    bar = BLOCKS[min(len(BLOCKS) - 1, round(utilization / 100 * (len(BLOCKS) - 1)))]
    if gpu.get("allocated_to"):
        return f"[green]{bar if utilization else '▪'}[/]"
    return "[dim]·[/]"


def frame(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], now: str, one_line: bool = False) -> Any:
    """The nodes, the queue and a legend. On a terminal the queue fills its width and cuts long reasons
    short; with ``one_line`` (a file or a pipe) every row is printed whole, on one line."""
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    grid = Table(title=f"nodes  ({now})", title_justify="left", box=None, header_style="bold")
    for column in ("NODE", "STATE", "GPUS", "UTIL", "USED", "REASON"):
        grid.add_column(column)
    for node in nodes:
        gpus = node["gpus"]
        used = sum(1 for g in gpus if g.get("allocated_to"))
        stale = node["state"] == "NOT_READY"  # its agent is silent: the readings are its last ones
        readings = [] if stale else [g["utilization"] for g in gpus if g.get("utilization") is not None]
        mean = f"{sum(readings) / len(readings):.0f}%" if readings else "-"
        style = STATE_STYLE.get(node["state"], "")
        grid.add_row(
            escape(node["name"]),
            f"[{style}]{node['state']}[/]" if style else node["state"],
            "".join(_gpu_cell(g, stale) for g in gpus) or "-",
            mean,
            f"{used}/{len(gpus)}",
            escape(node.get("reason", "")),
        )
    queue = Table(title="queue", title_justify="left", box=None, header_style="bold", expand=not one_line)
    for column in ("JOB", "NAME", "STATE", "USER", "GPUS", "PRIO"):
        queue.add_column(column, no_wrap=True, min_width=len(column))
    queue.add_column("WHERE / WHY", overflow="fold" if one_line else "ellipsis", no_wrap=True, ratio=1)
    live = [j for j in jobs if j["state"] in ("RUNNING", "PENDING")]
    for job in sorted(live, key=lambda j: (j["state"] != "RUNNING", -j["priority"], j["submitted_at"]))[:40]:
        where = " ".join(a["node"] for a in job["allocation"]) if job["state"] == "RUNNING" else job["reason"]
        style = STATE_STYLE.get(job["state"], "")
        queue.add_row(
            job["id"],
            escape(job["name"]),
            f"[{style}]{job['state']}[/]",
            escape(job["user"]),
            f"{job['nodes']}×{job['gpus_per_node']}",
            str(job["priority"]),
            escape(where),
        )
    counts = {s: sum(1 for j in jobs if j["state"] == s) for s in ("RUNNING", "PENDING")}
    summary = Text(
        f"{counts['RUNNING']} running, {counts['PENDING']} pending   "
        "GPU: ▁…█ utilization of an allocated GPU, · free, ✗ unhealthy"
    )
    return Group(grid, Text(""), queue, Text(""), summary)


def snapshot(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """One frame as data: the nodes, and the running and pending jobs (running first, as the queue shows them)."""
    live = [j for j in jobs if j["state"] in ("RUNNING", "PENDING")]
    live.sort(key=lambda j: (j["state"] != "RUNNING", -j["priority"], j["submitted_at"]))
    return {
        "at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),  # as the head writes its times
        "nodes": nodes,
        "jobs": live,
        "running": sum(1 for j in live if j["state"] == "RUNNING"),
        "pending": sum(1 for j in live if j["state"] == "PENDING"),
    }


@click.command()
@click.option(
    "--interval",
    type=FiniteFloatRange(min=0.2, max=3600),
    default=2.0,
    show_default=True,
    help="seconds between refreshes (0.2 to 3600)",
)
@click.option("--once", is_flag=True, help="print one frame and exit (for scripts and logs)")
@output_option
def top(interval: float, once: bool, output: str) -> None:
    """A live view of nodes (one mark per GPU), their utilization and the queue. Ctrl-C quits.

    Piped or redirected, it prints a frame every interval instead of redrawing one. With -o json it
    prints one frame as one JSON document and exits: {"at", "nodes", "jobs", "running", "pending"}, the
    node objects of `corral nodes` and the job objects of the running and pending jobs."""
    from rich.live import Live

    client = api()
    if output == "json":
        emit_json(snapshot(client.nodes(), client.jobs()))
        return
    console = stdout_console()
    one_line = output_width() is not None  # a file or a pipe, and no COLUMNS: rows are never folded

    def render() -> Any:
        return frame(client.nodes(), client.jobs(), time.strftime("%H:%M:%S"), one_line)

    if once:
        console.print(render())
        return
    if not console.is_terminal:  # piped or redirected: one frame after another, as they are drawn
        try:
            while True:
                console.print(render())
                console.file.flush()
                time.sleep(interval)
        except KeyboardInterrupt:
            return
    with Live(render(), console=console, refresh_per_second=4, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(render())
        except KeyboardInterrupt:
            pass
