"""Job commands: submit, jobs, show, wait (run is in ``corral.cli.run``, cancel in ``corral.cli.cancel``)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.files import input_name, read_input
from corral.cli.jobspec import spec_error, submitted, submitted_all, validated
from corral.cli.numbers import FiniteFloatRange
from corral.cli.render import (
    ago,
    allocation_text,
    figure,
    gpus_text,
    output_option,
    render,
    styled_state,
    table,
)
from corral.client.errors import NotFoundError

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")
STATES = ("PENDING", "RUNNING", *TERMINAL)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--array", help="one job per index: 0-99, 1,3,5-7, or 0-99%8 for at most 8 at once")
@click.option("--after-ok", "after_ok", multiple=True, metavar="JOB", help="start after JOB succeeded (repeatable)")
@click.option("--after-any", "after_any", multiple=True, metavar="JOB", help="start after JOB ended (repeatable)")
@output_option
def submit(file: str, array: str | None, after_ok: tuple[str, ...], after_any: tuple[str, ...], output: str) -> None:
    """Submit the job described by FILE (YAML; '-' reads standard input). Prints its id.

    With --array (or `array:` in the file) it submits one job per index, each with
    CORRAL_ARRAY_INDEX set, and prints every id, one per line. --array wins over the
    file's `array:` (a note on stderr says so).
    """
    from corral.spec import SPEC_TEXT_KEYS, SpecError, load_yaml_document

    text = read_input(file, "job file")
    try:
        data = load_yaml_document(text, source=input_name(file), as_written=SPEC_TEXT_KEYS)
    except SpecError as exc:
        raise spec_error(exc) from None
    if isinstance(data, dict):
        data = _with_options(data, array, after_ok, after_any)
    spec = validated(data, input_name(file))
    if spec.get("array") is not None:
        submitted_all(api().submit_batch([spec], idempotency_key=str(uuid.uuid4())), output)
        return
    job = api().submit(spec, idempotency_key=str(uuid.uuid4()))
    submitted(job, output)


def _with_options(
    data: dict[str, Any], array: str | None, after_ok: tuple[str, ...], after_any: tuple[str, ...]
) -> dict[str, Any]:
    """Command-line options override (array, with a note when the file gives another) or extend
    (dependencies) the file's fields."""
    data = dict(data)
    if array is not None:
        given = data.get("array")
        if given is not None and str(given) != array:
            click.echo(f"note: --array {array} replaces the file's array: {given}", err=True)
        data["array"] = array
    for key, extra in (("after_ok", after_ok), ("after_any", after_any)):
        if extra:
            listed = data.get(key) or []
            data[key] = [*listed, *extra] if isinstance(listed, list) else listed
    return data


def _jobs_table(rows: list[dict[str, Any]]) -> None:
    table(
        None,
        ["ID", "NAME", "STATE", "USER", "TEAM", "GPUS", "PRIO", "SUBMITTED", "NODES/REASON"],
        [
            [
                j["id"],
                j["name"],
                styled_state(j["state"]),
                j["user"],
                j["team"],
                gpus_text(j),
                j["priority"],
                ago(j["submitted_at"]),
                allocation_text(j) if j["state"] == "RUNNING" else j.get("reason", ""),
            ]
            for j in rows
        ],
    )


def _state(given: str) -> str:
    """A state asked for, in the contract's upper case; a bad one names the states as written there."""
    if given.upper() not in STATES:
        raise click.BadParameter(f"{given!r} is not a job state; the states are {', '.join(STATES)}")
    return given.upper()


@click.command("jobs")
@click.option("--all", "include_all", is_flag=True, help="include jobs that finished more than a day ago")
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="[" + "|".join(STATES) + "]",
    callback=lambda _ctx, _param, given: tuple(map(_state, given)),
    help="only jobs in this state (repeatable; any case)",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=10_000,
    show_default=True,
    help="at most this many jobs: pending and running ones first, then the newest",
)
@output_option
def jobs(include_all: bool, states: tuple[str, ...], limit: int, output: str) -> None:
    """List jobs: pending, running, and those that finished within a day (all with --all)."""
    rows = api().jobs(include_all=include_all, states=list(states), limit=limit)
    render(output, rows, _jobs_table)
    if len(rows) == limit:
        click.echo(f"note: showing the first {limit} jobs (--limit {limit}); more may match", err=True)


def _restarts_text(job: dict[str, Any]) -> str:
    restarts, allowed, preemptions = job["restarts"], job.get("max_restarts", 0), job.get("preemptions", 0)
    if not preemptions:
        return f"{restarts} of {allowed}"
    return f"{restarts} ({preemptions} preempted; {restarts - preemptions} of {allowed} after failures)"


def _usage_text(usage: dict[str, Any] | None) -> str | None:
    if not usage:
        return None
    hours = usage["gpu_seconds"] / 3600
    return f"{figure(hours)} GPU-hours, cost {figure(usage['cost'])}, {figure(usage['energy_kwh'], 3)} kWh"


def _show_table(job: dict[str, Any]) -> None:
    fields = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("state", styled_state(job["state"])),
        ("reason", job.get("reason", "")),
        ("user / team", f"{job['user']} / {job['team']}"),
        ("priority", job["priority"]),
        ("gpus", gpus_text(job)),
        ("launcher", job.get("launcher")),
        ("command", job["command"] if isinstance(job["command"], str) else " ".join(job["command"])),
        ("image", job.get("image")),
        ("volumes", ", ".join(job.get("volumes", [])) or None),
        ("allocation", allocation_text(job) or "-"),
        ("submitted", ago(job["submitted_at"])),
        ("started", ago(job.get("started_at"))),
        ("finished", ago(job.get("finished_at"))),
        ("exit code", job.get("exit_code")),
        ("restarts", _restarts_text(job)),
        ("expected start", job.get("expected_start")),
        ("preemptible", "yes" if job.get("preemptible") else "no"),
        ("last checkpoint", ago(job.get("last_checkpoint_at"))),
        ("checkpoint dir", job.get("checkpoint_dir")),
        ("usage", _usage_text(job.get("usage"))),
    ]
    fields[6:6] = _array_and_dependencies(job)
    table(None, ["FIELD", "VALUE"], [[k, "-" if v is None else v] for k, v in fields])
    if job.get("tasks"):
        table(
            "tasks",
            ["NODE RANK", "ATTEMPT", "NODE", "STATE", "EXIT", "DETAIL"],
            [
                [t["node_rank"], t.get("generation"), t["node"], t["state"], t.get("exit_code"), t.get("detail", "")]
                for t in job["tasks"]
            ],
        )


def _array_and_dependencies(job: dict[str, Any]) -> list[tuple[str, Any]]:
    """The rows of a job in an array or with dependencies; none for others."""
    rows: list[tuple[str, Any]] = []
    if job.get("array_id"):
        rows.append(("array", f"element {job.get('array_index')} of array {job['array_id']}"))
    for key in ("after_ok", "after_any"):
        if job.get(key):
            rows.append((key, ", ".join(job[key])))
    return rows


@click.command()
@click.argument("job_id", metavar="JOB", callback=names.JOB)
@output_option
def show(job_id: str, output: str) -> None:
    """Show one job: state, reason, allocation, exit code, tasks."""
    render(output, api().job(job_id), _show_table)


@click.command()
@click.argument("job_ids", metavar="JOB...", nargs=-1, required=True, callback=names.JOB)
@click.option("--timeout", type=FiniteFloatRange(min=0), help="give up after SECONDS (exit 124)")
@click.pass_context
def wait(ctx: click.Context, job_ids: tuple[str, ...], timeout: float | None) -> None:
    """Wait until every JOB has ended. Exit 0 if all SUCCEEDED, 1 otherwise, 124 on timeout."""
    client = api()
    deadline = None if timeout is None else time.monotonic() + timeout
    remaining = list(dict.fromkeys(job_ids))
    final: dict[str, str] = {}
    delay = 0.05
    while remaining:
        unknown: list[str] = []
        for job_id in list(remaining):
            try:
                state = client.job(job_id)["state"]
            except NotFoundError:
                unknown.append(job_id)  # every unknown id is named, not only the first
                continue
            if state in TERMINAL:
                final[job_id] = state
                remaining.remove(job_id)
        if unknown:
            raise NotFoundError(
                f"no job {unknown[0]!r}" if len(unknown) == 1 else "no jobs " + ", ".join(repr(j) for j in unknown)
            )
        if not remaining:
            break
        if deadline is not None and time.monotonic() >= deadline:
            click.echo(f"timed out waiting for {' '.join(remaining)}", err=True)
            ctx.exit(124)
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, 1.0)
    bad = {j: s for j, s in final.items() if s != "SUCCEEDED"}
    for job_id, state in bad.items():
        click.echo(f"{job_id} ended {state}", err=True)
    ctx.exit(1 if bad else 0)
