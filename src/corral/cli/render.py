"""Output: a rich table for people, or one JSON document with ``-o json``."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

output_option = click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table for people, json for scripts (one JSON document on stdout)",
)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


class Styled(str):
    """Text with rich markup of Corral's own (``styled_state``); every other value is printed as it is."""


UNBOUNDED_WIDTH = 100_000  # not a terminal: one line per row, whatever its length, for reading back


def stdout_console() -> Console:
    """A rich console on stdout whose reader going away (``| head``) raises ``BrokenPipeError``, for
    ``main`` to end quietly, rather than rich's own exit with status 1."""
    from rich.console import Console  # imported on use: it is the slowest import of a short command

    class PipedConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return PipedConsole(soft_wrap=False, width=output_width())


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.markup import escape  # rich is imported on use: it is the slowest import of a short command
    from rich.table import Table

    def cell(value: Any) -> str:
        if value is None:
            return ""
        return value if isinstance(value, Styled) else escape(str(value))

    grid = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        grid.add_column(escape(column), overflow="fold")
    for row in rows:
        grid.add_row(*(cell(v) for v in row))
    console = stdout_console()
    if title is not None:  # a line of its own: as a table title, it would be folded to the table's width
        console.print(escape(title), style="italic")
    console.print(grid)


def output_width() -> int | None:
    """None (the terminal's width) on a terminal; when stdout is a file or a pipe, no limit, so that
    rows are never folded across lines (unless COLUMNS sets one)."""
    return None if sys.stdout.isatty() or os.environ.get("COLUMNS") else UNBOUNDED_WIDTH


def ago(value: str | None, now: datetime | None = None) -> str:
    if not value:
        return "-"
    try:
        then = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0.0, ((now or datetime.now(UTC)) - then).total_seconds())
    return duration(seconds) + " ago"


def figure(value: float, places: int = 2) -> str:
    """``value`` with ``places`` decimals, except one above 0 that would show as 0 (a minute on one GPU is
    0.017 GPU-hours, a few seconds 0.00): then its first two significant digits, ``0.0014``, ``0.000028``."""
    text = f"{value:.{places}f}"
    if value and not any(c in "123456789" for c in text):
        from corral.sched.describe import plain_decimal  # the scheduler's package: only when needed

        return plain_decimal(float(f"{value:.2g}"))
    return text


def duration(seconds: float) -> str:
    """``42s``, ``1m05s``, ``2h03m``, ``3d04h``: whole seconds (59.6 s is ``1m00s``, never ``60s``)."""
    seconds = round(seconds) if seconds < 3600 else seconds
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{(seconds % 3600) // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d{(seconds % 86400) // 3600:02.0f}h"


def gpus_text(job: dict[str, Any]) -> str:
    gpus = job.get("gpus_per_node", 0)
    types = "|".join(job.get("gpu_types") or [])
    if not gpus:
        return "-"
    per_node = f"{gpus}" + (f"×{types}" if types else "")
    return per_node if job.get("nodes", 1) == 1 else f"{job['nodes']}×{per_node}"


def allocation_text(job: dict[str, Any]) -> str:
    parts = []
    for alloc in job.get("allocation") or []:
        gpus = ",".join(str(g) for g in alloc.get("gpus", []))
        parts.append(f"{alloc['node']}[{gpus}]" if gpus else alloc["node"])
    return " ".join(parts)


STATE_STYLE = {
    "PENDING": "yellow",
    "RUNNING": "cyan",
    "SUCCEEDED": "green",
    "FAILED": "red",
    "CANCELLED": "magenta",
    "TIMEOUT": "red",
    "READY": "green",
    "NOT_READY": "red",
    "DRAINED": "yellow",
}


def styled_state(state: str) -> Styled:
    from rich.markup import escape

    style = STATE_STYLE.get(state)
    return Styled(f"[{style}]{state}[/]" if style else escape(state))


def render(output: str, data: Any, as_table: Callable[[Any], None]) -> None:
    if output == "json":
        emit_json(data)
    else:
        as_table(data)
