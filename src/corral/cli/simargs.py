"""Options that ``corral sim`` and ``corral sim plan`` share, and reading the trace and cluster they name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from corral.cli.numbers import FiniteFloat, PlainIntRange

if TYPE_CHECKING:
    from corral.model import Quotas
    from corral.sim import Trace
    from corral.spec import ClusterSpec

F = TypeVar("F", bound=Callable[..., object])

MIN_SCALE_LOAD, MAX_SCALE_LOAD = 1e-6, 1_000_000.0
MAX_CHECKPOINT_S = 100 * 365 * 86_400  # the trace's limit on times (corral.sim.trace.MAX_SECONDS)
MAX_CLUSTER_SCALE = 100_000.0  # any larger factor takes a group past its 100,000 nodes (sim.whatif.MAX_GROUP_NODES)


def input_options(required: bool) -> Callable[[F], F]:
    """--trace, --cluster, --window, --limit, --scale-load and --checkpoint-interval."""
    options = [
        click.option(
            "--trace",
            "trace_path",
            required=required,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="job trace: CSV in the common schema (job_id, submit_time_s, duration_s, num_gpus, gpu_type, …)"
            + ("" if required else "  [required]"),
        ),
        click.option(
            "--cluster",
            "cluster_path",
            required=required,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="cluster file (YAML): node_groups and an optional gpu_speed table"
            + ("" if required else "  [required]"),
        ),
        click.option("--window", metavar="START:END", help="keep jobs with START <= submit_time_s < END (seconds)"),
        click.option(
            "--limit", type=PlainIntRange(min=0), metavar="N", help="keep the first N trace rows (after --window)"
        ),
        click.option(
            "--scale-load",
            type=FiniteFloat(MIN_SCALE_LOAD, MAX_SCALE_LOAD),
            default=1.0,
            show_default=True,
            metavar="X",
            help="jobs arrive X times faster (submit times divided by X)",
        ),
        click.option(
            "--checkpoint-interval",
            type=FiniteFloat(0, MAX_CHECKPOINT_S),
            default=0.0,
            show_default=True,
            metavar="SECONDS",
            help="a preempted job loses the work since its last checkpoint, taken every SECONDS of a run"
            " (a trace's checkpoint_interval_s column overrides it per job); 0 = nothing is lost",
        ),
    ]

    def decorate(function: F) -> F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


def load_inputs(
    trace_path: Path, cluster_path: Path, window: str | None, limit: int | None, scale_load: float
) -> tuple[ClusterSpec, Trace]:
    """The cluster file and the trace; bad input raises a usage error naming the option."""
    from corral.sim import load_cluster, parse_window, read_trace
    from corral.sim.trace import TraceError
    from corral.spec import SpecError

    try:
        span = parse_window(window) if window is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--window") from None
    try:
        spec = load_cluster(cluster_path)
    except SpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--cluster") from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{cluster_path}: not UTF-8 text", param_hint="--cluster") from None
    except OSError as exc:
        raise click.BadParameter(_unreadable(cluster_path, exc), param_hint="--cluster") from None
    try:
        trace = read_trace(trace_path, limit=limit, window=span, scale_load=scale_load)
    except TraceError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from None
    except OSError as exc:
        raise click.BadParameter(_unreadable(trace_path, exc), param_hint="--trace") from None
    if trace.ignored_columns:
        from corral.sim.trace import KNOWN_COLUMNS

        # a column without a name reads "column 3 (no name)": the note's own "column" word names it once
        ignored = ", ".join(text.removeprefix("column ") for text in trace.ignored_columns)
        count = len(trace.ignored_columns)
        click.echo(
            f"note: {trace_path}: {'column' if count == 1 else 'columns'} {ignored} not read; the columns read are"
            f" {', '.join(KNOWN_COLUMNS)}",
            err=True,
        )
    return spec, trace


def _unreadable(path: Path, exc: OSError) -> str:
    return f"{path}: cannot read it ({exc.strerror or exc})"


def no_rows_reason(trace: Trace, window: str | None, limit: int | None) -> str:
    """Why a trace without a single row to simulate or skip has none: ``--window``, ``--limit 0``, or no rows."""
    if trace.outside_window and trace.outside_span is not None:
        low, high = trace.outside_span
        if trace.outside_window == 1:
            when = f"its one row was submitted at {low:,.10g} s"
        else:
            when = f"its {trace.outside_window:,} rows were submitted from {low:,.10g} s to {high:,.10g} s"
        return f"--window {window} keeps no trace row ({when})"
    if limit == 0:
        return "--limit 0 keeps no trace row"
    return "the trace has no rows below its header"


def check_out_dir(out_dir: Path) -> None:
    """Create ``--out`` and make sure files can be written there, before any simulation runs."""
    import tempfile

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".corral-sim-"):
            pass
    except OSError as exc:
        raise click.BadParameter(f"{out_dir}: cannot write there ({exc.strerror or exc})", param_hint="--out") from None


def out_dir_option(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """``--out``'s folder; an empty name, which would mean the current folder unnoticed, is refused."""
    if value is None:
        return None
    if not value:
        message = "the folder name is empty; name a folder, or '.' for the current one"
        raise click.BadParameter(message, param_hint="--out")
    return Path(value)


def check_out_spares_inputs(out_dir: Path, policies: Sequence[str], inputs: Mapping[str, Path]) -> None:
    """Refuse an ``--out`` folder where a report file would overwrite a file given as input (by option)."""
    from corral.sim.htmlreport import out_files
    from corral.sim.report import same_file

    for name in out_files(policies):
        target = out_dir / name
        for option, path in inputs.items():
            if same_file(target, path):
                raise click.BadParameter(
                    f"{out_dir}: the report's {name} would overwrite {path}, the {option} file;"
                    " choose another folder, or move or rename that file",
                    param_hint="--out",
                )


def check_out_targets(out_dir: Path, policies: Sequence[str]) -> None:
    """Refuse an ``--out`` folder holding a folder, or a file that cannot be written, where the report
    writes one of its files: found before anything is simulated, not once half the report is written."""
    import os

    from corral.sim.htmlreport import out_files

    for name in out_files(policies):
        target = out_dir / name
        if target.is_dir():
            problem = "is a folder"
        elif target.exists() and not os.access(target, os.W_OK):
            problem = "is a file that cannot be written"
        else:
            continue
        raise click.BadParameter(
            f"{out_dir}: {target} {problem}, where the report writes its {name}; remove or rename it,"
            " or choose another folder",
            param_hint="--out",
        )


def check_policies(names: list[str]) -> None:
    """An unknown policy name is a usage error that lists the valid ones."""
    from corral.sched import POLICIES

    for name in names:
        if name not in POLICIES:
            valid = ", ".join(sorted(POLICIES))
            raise click.BadParameter(f"unknown policy {name!r}; valid policies: {valid}", param_hint="--policy")


@dataclass(frozen=True)
class HeadConfig:
    """What the scheduler reads from a head's cluster config: its speed table, quotas and team tree."""

    gpu_speed: dict[str, float]
    quotas: Quotas
    team_parents: dict[str, str]


def load_head_config(config_path: Path) -> HeadConfig:
    """The parts of a head's cluster config the scheduler reads; bad input names ``--config``."""
    from corral.head.config import quotas_of, team_parents_of
    from corral.spec import SpecError, load_cluster_config_yaml

    try:
        config = load_cluster_config_yaml(config_path.read_text(encoding="utf-8"), source=str(config_path))
    except SpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from None
    except UnicodeDecodeError:
        raise click.BadParameter(f"{config_path}: not UTF-8 text", param_hint="--config") from None
    except OSError as exc:
        raise click.BadParameter(_unreadable(config_path, exc), param_hint="--config") from None
    return HeadConfig(dict(config.gpu_speed), quotas_of(config), team_parents_of(config))
