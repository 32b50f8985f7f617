"""``corral sim``: replay a job trace on a simulated cluster and compare scheduling policies.

``corral sim --trace … --cluster …`` runs the simulation; ``corral sim plan …`` sizes a cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from corral.cli.numbers import FiniteFloat
from corral.cli.render import emit_json, output_option, table
from corral.cli.simargs import (
    MAX_CLUSTER_SCALE,
    HeadConfig,
    check_out_dir,
    check_out_spares_inputs,
    check_out_targets,
    check_policies,
    input_options,
    load_head_config,
    load_inputs,
    no_rows_reason,
    out_dir_option,
)
from corral.cli.simplan import plan

if TYPE_CHECKING:
    from corral.model import Node
    from corral.sim import SimResult, Workload

_DEFAULT = click.core.ParameterSource.DEFAULT


@click.group(invoke_without_command=True)
@input_options(required=False)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    metavar="NAME",
    help=(
        "scheduling policy to simulate: default, fifo, priority, tiresias or srpt-oracle (a clairvoyant bound);"
        " repeat to compare several (default: default)"
    ),
)
@click.option(
    "--cluster-scale",
    type=FiniteFloat(0, MAX_CLUSTER_SCALE),
    default=1.0,
    show_default=True,
    metavar="X",
    help="what if: every node group has X times its nodes (rounded to the nearest; a group at 0 goes)",
)
@click.option(
    "--add",
    multiple=True,
    metavar="NxTYPE",
    help="what if: N more GPUs of TYPE (in nodes like the file's group of TYPE, else 8-GPU catalogue nodes); repeat",
)
@click.option("--remove", multiple=True, metavar="NxTYPE", help="what if: N fewer GPUs of TYPE, in whole nodes; repeat")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    callback=out_dir_option,
    help="also write summary.json, jobs-POLICY.csv (one row per job) and report.html with its plots into this folder",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=(
        "the head's cluster config (YAML): the scheduler reads its gpu_speed table and its teams' quotas along"
        " the team tree (a job's team is its trace vc), as a head started with it would (jobs still run at the"
        " cluster file's speeds); without it, the cluster file's table and no quotas"
    ),
)
@output_option
@click.pass_context
def sim(
    ctx: click.Context,
    trace_path: Path | None,
    cluster_path: Path | None,
    window: str | None,
    limit: int | None,
    scale_load: float,
    checkpoint_interval: float,
    policies: tuple[str, ...],
    cluster_scale: float,
    add: tuple[str, ...],
    remove: tuple[str, ...],
    out_dir: Path | None,
    config_path: Path | None,
    output: str,
) -> None:
    """Replay a job trace on a simulated cluster, with Corral's scheduler, on a virtual clock.

    Prints job completion time (JCT = finish - submit) percentiles, wait, makespan, GPU
    utilization, preemptions and the GPU-hours they lost, fairness between teams, cost and
    energy for each policy. Rows that never ran, ask for no GPUs or can never fit the cluster
    are skipped and counted; jobs that never finish (held back by a --config quota) are counted
    and named. `corral sim plan` searches the cheapest cluster for a target wait. See docs/sim.md.
    """
    if ctx.invoked_subcommand is not None:
        given = [p for p in ctx.command.params if ctx.get_parameter_source(p.name or "") != _DEFAULT]
        if given:
            names = ", ".join(p.opts[0] for p in given)
            raise click.UsageError(f"{names}: give the options after '{ctx.invoked_subcommand}'")
        return
    for name, path in (("trace_path", trace_path), ("cluster_path", cluster_path)):
        if path is None:
            param = next(p for p in ctx.command.params if p.name == name)
            raise click.MissingParameter(ctx=ctx, param=param)
    assert trace_path is not None and cluster_path is not None
    _run(
        trace_path,
        cluster_path,
        window,
        limit,
        scale_load,
        checkpoint_interval,
        list(dict.fromkeys(policies or ("default",))),
        (cluster_scale, add, remove),
        out_dir,
        output,
        config_path,
    )


sim.add_command(plan)


def _run(
    trace_path: Path,
    cluster_path: Path,
    window: str | None,
    limit: int | None,
    scale_load: float,
    checkpoint_interval: float,
    names: list[str],
    what_if: tuple[float, Sequence[str], Sequence[str]],
    out_dir: Path | None,
    output: str,
    config_path: Path | None = None,
) -> None:
    from corral.client.errors import CorralError
    from corral.sim import build_nodes, prepare, summarize
    from corral.sim.cluster import describe
    from corral.sim.costs import group_rates, unrated
    from corral.sim.engine import PreemptionLoopError, SimulationError
    from corral.sim.report import (
        SPEND_COLUMNS,
        TABLE_COLUMNS,
        counted,
        oracle_note,
        report_document,
        skipped_note,
        spend_rows,
        table_rows,
        unfinished_note,
        write_out,
    )
    from corral.sim.whatif import WhatIfError, apply_what_if

    check_policies(names)
    spec, trace = load_inputs(trace_path, cluster_path, window, limit, scale_load)
    try:
        spec = apply_what_if(spec, *what_if)
    except WhatIfError as exc:
        raise click.UsageError(str(exc)) from None
    config = load_head_config(config_path) if config_path is not None else None
    inputs = {"--trace": trace_path, "--cluster": cluster_path}
    if config_path is not None:
        inputs["--config"] = config_path
    if out_dir is not None:
        check_out_spares_inputs(out_dir, names, inputs)
        check_out_dir(out_dir)
        check_out_targets(out_dir, names)
    nodes = build_nodes(spec)
    workload = prepare(trace, nodes)
    if not workload.jobs and not workload.skipped:
        click.echo(f"note: no job to simulate: {no_rows_reason(trace, window, limit)}", err=True)
    progress = sys.stderr if sys.stderr.isatty() else None
    try:
        results = simulate_policies(
            workload,
            nodes,
            names,
            spec.gpu_speed,
            checkpoint_interval,
            timeline=out_dir is not None,
            progress=progress,
            config=config,
            cross_rack_slowdown=spec.cross_rack_slowdown,
        )
    except SimulationError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from None
    except PreemptionLoopError as exc:
        raise CorralError(str(exc)) from None
    rates = group_rates(spec)
    summaries = {name: summarize(result, rates) for name, result in results.items()}
    document = report_document(summaries, workload.skipped_total, spec, results)
    for missing in unrated(spec):
        click.echo(f"note: {missing} in the cluster file or the GPU catalogue; counted as 0", err=True)
    if out_dir is not None:  # written before anything is printed: a closed stdout cannot lose them
        from corral.sim.htmlreport import write_html_report  # matplotlib loads only when plots are asked for

        try:
            write_out(out_dir, document, results, keep=list(inputs.values()))
            write_html_report(out_dir, document, results)
        except OSError as exc:
            raise click.BadParameter(
                f"{out_dir}: cannot write the report ({exc.strerror or exc})", param_hint="--out"
            ) from None

    if output == "json":
        emit_json(document)
    else:
        shape = f"{counted(len(nodes), 'node')}, {counted(spec.total_gpus, 'GPU')}: {describe(spec)}"
        click.echo(f"{counted(len(workload.jobs), 'job')} from {trace_path.name} on {shape}")
        table(None, TABLE_COLUMNS, table_rows(summaries))
        table(None, SPEND_COLUMNS, spend_rows(summaries))
        if (against_oracle := oracle_note(summaries)) is not None:
            click.echo(against_oracle)
        if workload.skipped:
            click.echo(skipped_note(workload.skipped))
        for line in unfinished_note(results, quotas=config is not None):
            click.echo(line)
    if out_dir is not None and output != "json":
        tables = ", ".join(f"jobs-{name}.csv" for name in results)
        click.echo(f"wrote {out_dir}/summary.json, {tables}, report.html and its plots")


def simulate_policies(
    workload: Workload,
    nodes: Sequence[Node],
    names: Sequence[str],
    speed: Mapping[str, float],
    checkpoint_s: float,
    *,
    timeline: bool = False,
    progress: IO[str] | None = None,
    config: HeadConfig | None = None,
    cross_rack_slowdown: float = 1.0,
) -> dict[str, SimResult]:
    """Each policy's run, in order; ``timeline`` records what the plots need; with ``progress`` (a
    terminal), a bar per policy advances there as jobs finish. The scheduler reads the speed table
    of ``config`` (a head's cluster config) when given, else ``speed`` (the run times' table), and
    the config's quotas along its team tree."""
    from corral.sched import get_policy
    from corral.sim import simulate

    def run(name: str, on_finish: Callable[[], None] | None) -> SimResult:
        policy = get_policy(name)
        return simulate(
            workload,
            nodes,
            policy,
            speed,
            checkpoint_s=checkpoint_s,
            timeline=timeline,
            on_finish=on_finish,
            scheduler_speed=config.gpu_speed if config is not None else None,
            quotas=config.quotas if config is not None else None,
            team_parents=config.team_parents if config is not None else None,
            cross_rack_slowdown=cross_rack_slowdown,
        )

    if progress is None:
        return {name: run(name, None) for name in names}
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    results = {}
    with Progress(*columns, console=Console(file=progress, force_terminal=True), transient=True) as bar:
        for name in names:
            task = bar.add_task(name, total=len(workload.jobs))
            results[name] = run(name, partial(bar.advance, task))
    return results
