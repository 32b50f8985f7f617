"""`corral run`: submit a command as a job without writing a file."""

from __future__ import annotations

import uuid
from typing import Any

import click

from corral.cli.context import api
from corral.cli.jobspec import submitted, submitted_all, validated
from corral.cli.render import output_option
from corral.client.errors import InvalidRequest

# The `corral run` option that sets each job-file field, named beside it in an error.
RUN_OPTIONS = {
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
    "priority_class": "--priority-class",
    "queue": "--queue",
    "after_ok": "--after-ok",
    "after_any": "--after-any",
    "array": "--array",
}


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
@click.option("--priority-class", "priority_class", help="a priority class of the cluster config (sets priority)")
@click.option("--queue", help="a queue of the cluster config (its time limit and priority class apply)")
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
@click.option("--after-ok", "after_ok", multiple=True, metavar="JOB", help="start after JOB succeeded (repeatable)")
@click.option("--after-any", "after_any", multiple=True, metavar="JOB", help="start after JOB ended (repeatable)")
@click.option("--array", help="one job per index: 0-99, 1,3,5-7, or 0-99%8 for at most 8 at once")
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
    priority_class: str | None,
    queue: str | None,
    time_limit: str | None,
    max_restarts: int,
    preemptible: bool,
    grace_period: str | None,
    launcher: str,
    env: tuple[str, ...],
    image: str | None,
    volumes: tuple[str, ...],
    after_ok: tuple[str, ...],
    after_any: tuple[str, ...],
    array: str | None,
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
        "env": parse_env(env),
    }
    if preemptible:
        spec["preemptible"] = True
    if volumes:
        spec["volumes"] = list(volumes)
    for key, value in (
        ("name", name),
        ("team", team),
        ("priority_class", priority_class),
        ("queue", queue),
        ("time_limit", time_limit),
        ("grace_period", grace_period),
        ("image", image),
        ("array", array),
    ):
        if value is not None:
            spec[key] = value
    for key, listed in (("after_ok", after_ok), ("after_any", after_any)):
        if listed:
            spec[key] = list(listed)
    body = validated(spec, "job", RUN_OPTIONS)  # a bad spec exits 2 before the head is looked for
    if array is not None:
        submitted_all(api().submit_batch([body], idempotency_key=str(uuid.uuid4())), output)
        return
    job = api().submit(body, idempotency_key=str(uuid.uuid4()))
    submitted(job, output)


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
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
