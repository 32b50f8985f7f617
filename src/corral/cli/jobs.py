"""Job commands: submit, run, jobs, show, wait (cancel is in ``corral.cli.cancel``)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.files import read_input
from corral.cli.numbers import FiniteFloatRange
from corral.cli.render import (
    ago,
    allocation_text,
    emit_json,
    gpus_text,
    output_option,
    render,
    styled_state,
    table,
)
from corral.client.errors import InvalidRequest

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT")
STATES = ("PENDING", "RUNNING", *TERMINAL)


# The `corral run` option that sets each job-file field, named beside it in an error.
_RUN_OPTIONS = {
    "command": "COMMAND",
    "nodes": "--nodes",
    "resources.gpus": "--gpus",
    "resources.gpu_type": "--gpu-type",
    "resources.cpus": "--cpus",
    "resources.memory": "--memory",
    "priority": "--priority",
    "max_restarts": "--max-restarts",
    "launcher": "--launcher",
    "env": "--env",
    "volumes": "--volume",
    "name": "--name",
    "team": "--team",
    "time_limit": "--time-limit",
    "grace_period": "--grace-period",
    "image": "--image",
}


def _spec_error(exc: Exception, options: Mapping[str, str] | None = None) -> InvalidRequest:
    """Every problem of a spec, one per line; with ``options``, each field the option that set it."""
    errors = getattr(exc, "errors", None)
    if not isinstance(errors, list):
        return InvalidRequest(f"invalid job spec:\n  {exc}")
    options = options or {}
    lines = []
    for error in errors:
        field = error.field
        option = options.get(field) or options.get(field.split(".")[0].split("[")[0])
        lines.append(f"{option} ({field}): {error.message}" if option else str(error))
    return InvalidRequest("invalid job spec:\n  " + "\n  ".join(lines))


def _validated(data: Any, source: str, options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Validate here for a clear exit 2 even before the head is reached; send the user's own fields.
    ``options``: the command-line option behind each field, to name in errors."""
    from corral.spec import SpecError, parse_job_spec

    try:
        parse_job_spec(data, source)
    except SpecError as exc:
        raise _spec_error(exc, options) from None
    body = {k: v for k, v in data.items() if k != "kind"}
    body.setdefault("workdir", os.getcwd())
    return body


def _submitted(job: dict[str, Any], output: str) -> None:
    if output == "json":
        emit_json({"id": job["id"]})
    else:
        click.echo(job["id"])


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
    from corral.spec import SpecError, load_yaml_document

    text = read_input(file, "job file")
    try:
        data = load_yaml_document(text, source=file)
    except SpecError as exc:
        raise _spec_error(exc) from None
    if isinstance(data, dict):
        data = _with_options(data, array, after_ok, after_any)
    spec = _validated(data, file)
    if spec.get("array") is not None:
        ids = api().submit_batch([spec])
        if output == "json":
            emit_json({"id": ids[0], "ids": ids})
        else:
            click.echo("\n".join(ids))
        return
    job = api().submit(spec, idempotency_key=str(uuid.uuid4()))
    _submitted(job, output)


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


def _parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    from corral.spec import parse_env_pair

    env: dict[str, str] = {}
    for pair in pairs:
        try:
            key, value = parse_env_pair(pair)
        except ValueError as exc:
            raise InvalidRequest(f"--env: {exc}") from None
        if key in env:
            twice = f"{key}={env[key]} and {pair}"
            raise InvalidRequest(f"--env: {key!r} is given twice ({twice}); give each variable once")
        env[key] = value
    return env


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("--name", help="job name (default: the command's first word)")
@click.option(
    "--gpus",
    type=float,
    default=0,
    show_default=True,
    help="GPUs per node: a whole number, or a fraction from 0.01 to below 1 (0.5 shares one GPU)",
)
@click.option(
    "--gpu-type",
    "gpu_type",
    multiple=True,
    help="acceptable GPU types, preferred first: H100,A100 (or the option repeated, in order)",
)
@click.option("--nodes", type=int, default=1, show_default=True, help="nodes in the gang")
@click.option("--cpus", type=float, help="CPU cores per node to reserve")
@click.option("--memory", help="host memory per node to reserve, e.g. 64GB")
@click.option("--team", help="team charged for the job")
@click.option("--priority", type=int, default=0, show_default=True, help="higher runs first")
@click.option("--time-limit", "time_limit", help="wall-clock limit, e.g. 30m or 2h")
@click.option("--max-restarts", "max_restarts", type=int, default=0, show_default=True)
@click.option("--preemptible", is_flag=True, help="may be stopped and requeued for a higher-priority job")
@click.option("--grace-period", "grace_period", help="SIGTERM to SIGKILL when stopped, e.g. 30s")
@click.option("--launcher", type=click.Choice(["per-node", "per-gpu"]), default="per-node", show_default=True)
@click.option("--env", "env", multiple=True, metavar="K=V", help="environment variable (repeatable)")
@click.option("--image", help="run the command in this container image")
@click.option(
    "--volume",
    "volumes",
    multiple=True,
    metavar="HOST:CONTAINER[:ro|rw]",
    help="with --image: mount a host directory into the container (repeatable)",
)
@output_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    name: str | None,
    gpus: float,
    gpu_type: tuple[str, ...],
    nodes: int,
    cpus: float | None,
    memory: str | None,
    team: str | None,
    priority: int,
    time_limit: str | None,
    max_restarts: int,
    preemptible: bool,
    grace_period: str | None,
    launcher: str,
    env: tuple[str, ...],
    image: str | None,
    volumes: tuple[str, ...],
    output: str,
    command: tuple[str, ...],
) -> None:
    """Submit COMMAND as a job without writing a file. Prints its id.

    Put the command after `--`. One argument runs through the shell (pipes, &&);
    several run as an argument list.

        corral run --gpus 1 -- python train.py --epochs 3
    """
    resources: dict[str, Any] = {"gpus": gpus}
    if gpu_type:
        resources["gpu_type"] = ",".join(gpu_type)
    if cpus is not None:
        resources["cpus"] = cpus
    if memory is not None:
        resources["memory"] = memory
    spec: dict[str, Any] = {
        "command": command[0] if len(command) == 1 else list(command),
        "nodes": nodes,
        "resources": resources,
        "priority": priority,
        "max_restarts": max_restarts,
        "launcher": launcher,
        "env": _parse_env(env),
    }
    if preemptible:
        spec["preemptible"] = True
    if volumes:
        spec["volumes"] = list(volumes)
    for key, value in (
        ("name", name),
        ("team", team),
        ("time_limit", time_limit),
        ("grace_period", grace_period),
        ("image", image),
    ):
        if value is not None:
            spec[key] = value
    body = _validated(spec, "job", _RUN_OPTIONS)  # a bad spec exits 2 before the head is looked for
    job = api().submit(body, idempotency_key=str(uuid.uuid4()))
    _submitted(job, output)


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


@click.command("jobs")
@click.option("--all", "include_all", is_flag=True, help="include jobs that finished more than a day ago")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES, case_sensitive=False),
    help="only jobs in this state (repeatable)",
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
    rows = api().jobs(include_all=include_all, states=[s.upper() for s in states], limit=limit)
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
    return f"{hours:.2f} GPU-hours, cost {usage['cost']:.2f}, {usage['energy_kwh']:.3f} kWh"


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
            ["RANK", "ATTEMPT", "NODE", "STATE", "EXIT", "DETAIL"],
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
        for job_id in list(remaining):
            state = client.job(job_id)["state"]
            if state in TERMINAL:
                final[job_id] = state
                remaining.remove(job_id)
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
