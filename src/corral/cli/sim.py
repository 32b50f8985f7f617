"""``corral sim``: replay a job trace on a simulated cluster and compare scheduling policies."""

from __future__ import annotations

from pathlib import Path

import click

from corral.cli.render import emit_json, output_option, table


@click.command()
@click.option(
    "--trace",
    "trace_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="job trace: CSV in the common schema (job_id, submit_time_s, duration_s, num_gpus, gpu_type, …)",
)
@click.option(
    "--cluster",
    "cluster_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="cluster file (YAML): node_groups and an optional gpu_speed table",
)
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
@click.option("--window", metavar="START:END", help="keep jobs with START <= submit_time_s < END (seconds)")
@click.option("--limit", type=click.IntRange(min=0), metavar="N", help="keep the first N trace rows (after --window)")
@click.option(
    "--scale-load",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    metavar="X",
    help="jobs arrive X times faster (submit times divided by X)",
)
@click.option(
    "--checkpoint-interval",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="a preempted job loses the work since its last checkpoint, taken every SECONDS of a run"
    " (a trace's checkpoint_interval_s column overrides it per job); 0 = nothing is lost",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="also write summary.json and jobs-POLICY.csv (one row per job) into this folder",
)
@output_option
def sim(
    trace_path: Path,
    cluster_path: Path,
    policies: tuple[str, ...],
    window: str | None,
    limit: int | None,
    scale_load: float,
    checkpoint_interval: float,
    out_dir: Path | None,
    output: str,
) -> None:
    """Replay a job trace on a simulated cluster, with Corral's scheduler, on a virtual clock.

    Prints job completion time (JCT = finish - submit) percentiles, average wait, makespan,
    GPU utilization, preemptions and the GPU-hours they lost for each policy. Rows that never
    ran, ask for no GPUs or can never fit the cluster are skipped and counted. See docs/sim.md.
    """
    from corral.sched import POLICIES, get_policy
    from corral.sim import build_nodes, load_cluster, parse_window, prepare, read_trace, simulate, summarize
    from corral.sim.report import TABLE_COLUMNS, report_document, table_rows, write_out
    from corral.sim.trace import TraceError
    from corral.spec import SpecError

    names = list(dict.fromkeys(policies or ("default",)))
    for name in names:
        if name not in POLICIES:
            valid = ", ".join(sorted(POLICIES))
            raise click.BadParameter(f"unknown policy {name!r}; valid policies: {valid}", param_hint="--policy")
    try:
        span = parse_window(window) if window is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--window") from None
    try:
        spec = load_cluster(cluster_path)
    except SpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--cluster") from None
    try:
        trace = read_trace(trace_path, limit=limit, window=span, scale_load=scale_load)
    except TraceError as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from None
    nodes = build_nodes(spec)
    workload = prepare(trace, nodes)
    results = {
        name: simulate(workload, nodes, get_policy(name), spec.gpu_speed, checkpoint_s=checkpoint_interval)
        for name in names
    }
    summaries = {name: summarize(result) for name, result in results.items()}
    document = report_document(summaries, workload.skipped_total)
    if out_dir is not None:
        write_out(out_dir, document, results)
    if output == "json":
        emit_json(document)
        return
    gpus = sum(len(n.gpus) for n in nodes)
    click.echo(f"{len(workload.jobs)} jobs from {trace_path.name} on {len(nodes)} nodes, {gpus} GPUs")
    table(None, TABLE_COLUMNS, table_rows(summaries))
    if workload.skipped:
        click.echo("skipped: " + ", ".join(f"{count} {reason}" for reason, count in workload.skipped.items()))
    if out_dir is not None:
        click.echo(f"wrote {out_dir}/summary.json and jobs-POLICY.csv")
