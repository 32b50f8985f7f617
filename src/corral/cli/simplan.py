"""``corral sim plan``: the cheapest cluster on which a trace's p95 wait meets a target."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from corral.cli.numbers import PlainIntRange
from corral.cli.render import duration, emit_json, output_option, table
from corral.cli.simargs import check_policies, input_options, load_inputs, no_rows_reason

if TYPE_CHECKING:
    from corral.sim.plan import Outcome, PlanResult


MISSES = "misses at the largest size searched"  # why a candidate that could run the trace does not meet it
# Why it does not when its largest size searched is too small to replay the trace within the clock.
OVERRUNS = "misses at the largest size searched: its jobs run past the simulated clock's 5,000-year limit"


@click.command()
@input_options(required=True)
@click.option(
    "--target-p95-wait",
    "target",
    required=True,
    metavar="DURATION",
    help=(
        "the p95 queueing delay to meet (time queued: until the first start, and after each preemption until"
        " the next): 0, 90s, 30m, 2h, 1h30m or HH:MM:SS"
    ),
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    metavar="NAME",
    help="scheduling policy to simulate, once (default: default)",
)
@click.option(
    "--gpu-type",
    "gpu_types",
    multiple=True,
    metavar="TYPE",
    help="a candidate: clusters of TYPE only (repeat; default: the file's mix and each of its GPU types)",
)
@click.option(
    "--max-gpus",
    type=PlainIntRange(min=1),
    metavar="N",
    help="search no cluster above N GPUs (default: up to each candidate's zero-wait size)",
)
@output_option
def plan(
    trace_path: Path,
    cluster_path: Path,
    window: str | None,
    limit: int | None,
    scale_load: float,
    checkpoint_interval: float,
    target: str,
    policies: tuple[str, ...],
    gpu_types: tuple[str, ...],
    max_gpus: int | None,
    output: str,
) -> None:
    """Search the cheapest cluster (cost per hour) on which the trace's p95 wait meets a target.

    Candidates: n nodes of one GPU type, or the cluster file's mix scaled; for each, the
    smallest n that meets the target (doubling, then bisection). Prints the recommended node
    groups, GPUs, cost per hour, p95 wait and average JCT, and how many simulations it took.
    Exits 1 when no candidate meets the target within the bounds. See docs/sim.md.
    """
    from corral.client.errors import CorralError
    from corral.sched import get_policy
    from corral.sim import Trace, build_nodes, prepare
    from corral.sim.engine import PreemptionLoopError
    from corral.sim.families import PlanError, families
    from corral.sim.plan import plan as search
    from corral.sim.report import skipped_reasons

    check_policies(list(policies))
    if len(set(policies)) > 1:
        raise click.BadParameter(
            f"plan simulates one policy, got {len(policies)} ({', '.join(policies)}); give it once",
            param_hint="--policy",
        )
    policy = policies[0] if policies else "default"
    target_s = parse_target(target)
    check_gpu_types(gpu_types)
    spec, trace = load_inputs(trace_path, cluster_path, window, limit, scale_load)
    reference = prepare(trace, build_nodes(spec))
    if not reference.jobs:
        why = no_rows_reason(trace, window, limit)
        if reference.skipped:
            why = f"every trace row was skipped ({skipped_reasons(reference.skipped)})"
        raise click.BadParameter(f"{trace_path}: no job to plan for: {why}", param_hint="--trace")
    jobs = Trace(jobs=tuple(j.trace for j in reference.jobs))
    first: dict[str, str] = {}
    for gpu_type in gpu_types:  # types match case aside: each once, as first spelled
        first.setdefault(gpu_type.lower(), gpu_type)
    unique = tuple(first.values())
    try:
        candidates = families(spec, jobs, unique)
    except PlanError as exc:
        raise click.UsageError(str(exc)) from None
    with _status(sys.stderr.isatty()) as on_trial:
        try:
            result = search(
                jobs,
                candidates,
                get_policy(policy),
                target_s,
                max_gpus=max_gpus,
                checkpoint_s=checkpoint_interval,
                on_trial=on_trial,
            )
        except PreemptionLoopError as exc:
            raise CorralError(str(exc)) from None
    document = plan_document(result, policy, len(jobs.jobs), reference.skipped_total)
    if output == "json":
        emit_json(document)
    else:
        _print(document, result)
    if result.recommended is None:
        click.echo(f"error: {failure(result)}", err=True)
        sys.exit(1)


def failure(result: PlanResult) -> str:
    """Why nothing was recommended: no candidate could run the trace, or none met the target."""
    if all(o.trial is None for o in result.outcomes):
        text = "no candidate cluster can run this trace (see each one's reason)"
        if any("price_per_gpu_hour" in (o.reason or "") for o in result.outcomes):
            text += "; price the cluster file's node groups (price_per_gpu_hour) or name candidates with --gpu-type"
        return text
    return (
        f"no candidate cluster meets p95 wait <= {result.target_s:g}s within the search bounds"
        " (each candidate's zero-wait size, or --max-gpus); the table shows each one's closest"
    )


@contextmanager
def _status(shown: bool) -> Iterator[Callable[[str, int], None] | None]:
    """On a terminal, a status line on stderr naming the simulation that runs; otherwise nothing."""
    if not shown:
        yield None
        return
    from rich.console import Console

    count = 0
    with Console(stderr=True).status("planning") as status:

        def update(family: str, gpus: int) -> None:
            nonlocal count
            count += 1
            status.update(f"simulation {count}: {family} with {gpus} GPUs")

        yield update


def parse_target(text: str) -> float:
    """The target in seconds; 0 is allowed, however spelled (``0s``, ``0m``, ``00:00:00``)."""
    from corral.spec import parse_duration_s

    if text.strip().startswith("-"):
        raise click.BadParameter(f"must be 0 or more, got {text!r}", param_hint="--target-p95-wait")
    try:
        return parse_duration_s(text, allow_zero=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--target-p95-wait") from None


def check_gpu_types(gpu_types: tuple[str, ...]) -> None:
    """An empty ``--gpu-type`` is refused by itself, before the files are read."""
    from corral.sim.catalogue import known_types

    for gpu_type in gpu_types:
        if not gpu_type.strip():
            raise click.BadParameter(
                f"the GPU type name is empty ({gpu_type!r}); name one of the cluster file's types"
                f" or of the built-in catalogue ({known_types()})",
                param_hint="--gpu-type",
            )


def plan_document(result: PlanResult, policy: str, jobs: int, skipped: int) -> dict[str, Any]:
    """The ``-o json`` document: the target, every candidate's answer, and the recommended one."""
    recommended = result.recommended
    return {
        "target_p95_wait_s": result.target_s,
        "policy": policy,
        "jobs": jobs,
        "skipped_jobs": skipped,
        "simulations": result.simulations,
        "recommended": _outcome(recommended) if recommended is not None else None,
        "candidates": [_outcome(o) for o in result.outcomes],
    }


def _outcome(outcome: Outcome) -> dict[str, Any]:
    from corral.sim.report import cluster_document

    trial = outcome.trial
    entry: dict[str, Any] = {
        "candidate": outcome.family,
        "meets_target": outcome.meets,
        "reason": outcome.reason if outcome.reason or outcome.meets else _misses(outcome),
        "simulations": outcome.simulations,
    }
    if trial is None:
        return entry
    summary = trial.summary
    cluster = cluster_document(trial.spec)
    entry.update(
        node_groups=[
            {k: g[k] for k in ("name", "gpu_type", "count", "gpus_per_node", "gpus", "price_per_gpu_hour")}
            for g in cluster["node_groups"]
        ],
        nodes=cluster["nodes"],
        gpus=cluster["gpus"],
        cost_per_hour=trial.cost_per_hour,
        p95_wait_s=summary.p95_wait_s if summary else None,
        avg_wait_s=summary.avg_wait_s if summary else None,
        avg_jct_s=summary.avg_jct_s if summary else None,
        utilization=summary.utilization if summary else None,
    )
    return entry


def _misses(outcome: Outcome) -> str:
    """Why a candidate that could run the trace misses the target at its largest size searched."""
    return OVERRUNS if outcome.trial is not None and outcome.trial.overrun else MISSES


def _print(document: dict[str, Any], result: PlanResult) -> None:
    from corral.sim.report import counted

    jobs, skipped = counted(document["jobs"], "job"), counted(document["skipped_jobs"], "trace row")
    click.echo(
        f"target: p95 wait <= {duration(result.target_s)} under {document['policy']}; {jobs} ({skipped} skipped);"
        f" {counted(document['simulations'], 'simulation')}"
    )
    rows = []
    for entry in document["candidates"]:
        if "gpus" not in entry:
            rows.append([entry["candidate"], "-", "-", "-", "-", "-", f"cannot: {entry['reason']}"])
            continue
        verdict = "meets" if entry["meets_target"] else entry["reason"]
        ran = entry["p95_wait_s"] is not None  # None: the simulation ran past the clock's limit
        rows.append(
            [
                entry["candidate"],
                _groups_text(entry),
                str(entry["gpus"]),
                f"{entry['cost_per_hour']:,.2f}",
                duration(entry["p95_wait_s"]) if ran else "-",
                duration(entry["avg_jct_s"]) if ran else "-",
                verdict,
            ]
        )
    table(None, ("CANDIDATE", "NODES", "GPUS", "COST/H", "P95 WAIT", "AVG JCT", "RESULT"), rows)
    best = document["recommended"]
    if best is not None:
        gpus = counted(best["gpus"], "GPU")
        click.echo(
            f"recommended: {_groups_text(best)} ({gpus}), {best['cost_per_hour']:,.2f} per hour,"
            f" p95 wait {duration(best['p95_wait_s'])}, avg JCT {duration(best['avg_jct_s'])}"
        )


def _groups_text(entry: dict[str, Any]) -> str:
    return ", ".join(f"{g['name']} {g['count']}×{g['gpus_per_node']} {g['gpu_type']}" for g in entry["node_groups"])
