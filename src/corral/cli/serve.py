"""Service commands: serve, services, service show|scale|delete, and the standalone gateway."""

from __future__ import annotations

import time
from typing import Any

import click

from corral.cli import names
from corral.cli.files import input_name, read_input
from corral.cli.jobspec import with_workdir
from corral.cli.render import ago, emit_json, output_option, render, styled_state, table
from corral.client.errors import InvalidRequest

SCALE_SETTLE_S = 10.0


def _services_api() -> Any:
    from corral.client.config import load_config
    from corral.client.light import LightTransport
    from corral.client.services import ServiceApi

    config = load_config()
    return ServiceApi(LightTransport(config.head_url, config.token))


def _read_spec(file: str) -> dict[str, Any]:
    """The file's fields, checked here for a clear exit 2 before the head is reached."""
    from corral.spec import SPEC_TEXT_KEYS, FieldError, SpecError, load_yaml_document
    from corral.spec.service import parse_service_spec

    text = read_input(file, "service file")
    try:
        data = load_yaml_document(text, source=input_name(file), as_written=SPEC_TEXT_KEYS)
        parse_service_spec(data, input_name(file))
        if data.get("kind") != "service":  # a job file served by mistake would become a service
            raise SpecError(
                [FieldError("kind", "a service file needs `kind: service` (a batch job goes to `corral submit`)")]
            )
    except SpecError as exc:
        raise InvalidRequest("invalid service spec:\n  " + "\n  ".join(str(e) for e in exc.errors)) from None
    return with_workdir({k: v for k, v in data.items() if k != "kind"})


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@output_option
def serve(file: str, output: str) -> None:
    """Create the service FILE describes (YAML, `kind: service`), or update the one of that name.

    Prints the service's name. A changed command, resources or environment rolls out one
    replica at a time: one new replica starts, and an old one is drained once it is ready.
    """
    service = _services_api().apply(_read_spec(file))
    if output == "json":
        emit_json({"name": service["name"], "revision": service["revision"], "url": service["url"]})
    else:
        click.echo(service["name"])


def _services_table(rows: list[dict[str, Any]]) -> None:
    table(
        None,
        ["NAME", "READY", "DESIRED", "MIN-MAX", "REVISION", "URL", "UPDATED", "REASON"],
        [
            [
                s["name"],
                s["replicas_ready"],
                s["replicas_desired"],
                f"{s['replicas_min']}-{s['replicas_max']}",
                s["revision"],
                s["url"],
                ago(s["updated_at"]),
                s.get("reason") or "",
            ]
            for s in rows
        ],
    )


@click.command()
@output_option
def services(output: str) -> None:
    """List services: replicas ready and desired, revision and gateway URL."""
    render(output, _services_api().services(), _services_table)


@click.group()
def service() -> None:
    """Inspect, scale or delete one service."""


def _show_table(s: dict[str, Any]) -> None:
    spec = s["spec"]
    command = spec["command"] if isinstance(spec["command"], str) else " ".join(spec["command"])
    fields = [
        ("name", s["name"]),
        ("url", s["url"]),
        ("user", s["user"]),
        ("revision", s["revision"]),
        (
            "replicas",
            f"{s['replicas_ready']} ready of {s['replicas_desired']} desired ({s['replicas_min']}-{s['replicas_max']})",
        ),
        ("command", command),
        ("readiness", spec["readiness"]["path"]),
        ("priority", spec.get("priority", 0)),
        ("reason", s.get("reason") or "-"),
    ]
    table(None, ["FIELD", "VALUE"], [[k, v] for k, v in fields])
    table(
        "replicas",
        ["JOB", "REVISION", "STATE", "READY", "NODE", "URL"],
        [
            [
                r["job_id"],
                r["revision"],
                styled_state(r["state"]),
                "draining" if r["draining"] else ("yes" if r["ready"] else "no"),
                r.get("node") or "-",
                r.get("url") or "-",
            ]
            for r in s["replicas"]
        ],
    )


@service.command("show")
@click.argument("name", callback=names.SERVICE)
@output_option
def show(name: str, output: str) -> None:
    """Show a service and its replicas."""
    render(output, _services_api().service(name), _show_table)


@service.command("scale")
@click.argument("name", callback=names.SERVICE)
@click.argument("replicas", type=click.IntRange(0, 256))
@output_option
def scale(name: str, replicas: int, output: str) -> None:
    """Run exactly REPLICAS replicas (0 stops them all) until `corral serve` applies the file again.

    JSON: the service object once the head has taken the new count in (no more than REPLICAS
    replicas ready in the pool; the surplus draining), waiting up to 10 s for it.
    """
    api = _services_api()
    out = api.scale(name, replicas)
    if output == "json":
        emit_json(_settled(api, name, replicas, out))
    else:
        click.echo(f"{name}: {replicas} replica{'' if replicas == 1 else 's'}")


def _settled(api: Any, name: str, replicas: int, out: dict[str, Any]) -> dict[str, Any]:
    """The service once its pool holds at most ``replicas`` ready replicas: the head answers a scale
    as it commits it, before its serve loop (twice a second) drains the surplus."""
    deadline = time.monotonic() + SCALE_SETTLE_S
    while out["replicas_ready"] > replicas and time.monotonic() < deadline:
        time.sleep(0.2)
        out = api.service(name)
    return out


@service.command("delete")
@click.argument("name", callback=names.SERVICE)
@output_option
def delete(name: str, output: str) -> None:
    """Delete a service; its replicas are stopped. JSON: {"name", "deleted": true}."""
    _services_api().delete(name)
    if output == "json":
        emit_json({"name": name, "deleted": True})
    else:
        click.echo(f"{name}: deleted")


@click.command()
@click.option("--head", "head_url", help="the head's URL (default: CORRAL_HEAD, or CORRAL_HOME's config)")
@click.option("--token", help="a token to read the head with (default: CORRAL_TOKEN, or CORRAL_HOME's config)")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on (0.0.0.0 for all)")
@click.option("--port", type=click.IntRange(1, 65535), default=8480, show_default=True)
def gateway(head_url: str | None, token: str | None, host: str, port: int) -> None:
    """Run a gateway apart from the head: HOST:PORT/s/SERVICE/... goes to a ready replica.

    It learns the ready replicas from the head and reports its traffic to the head's autoscaler.
    """
    from corral.client.config import check_token, head_url_problem, load_config
    from corral.obs.logging import setup_logging
    from corral.serve.proxy.standalone import run

    if head_url is not None and (problem := head_url_problem(head_url)):
        raise click.BadParameter(problem, param_hint="--head")
    if token is not None:
        check_token(token, "--token")
    if head_url is None or token is None:
        config = load_config()
        head_url = head_url or config.head_url
        token = token if token is not None else config.token
    _check_credentials(head_url, token)
    setup_logging("gateway")
    run(head_url, token, host, port)


def _check_credentials(head_url: str, token: str) -> None:
    """A token the head refuses exits 5 at once (it would be refused on every poll); a head that cannot be
    reached yet is waited for, as the gateway waits for it while it runs."""
    from corral.client.errors import Unreachable
    from corral.client.light import LightTransport
    from corral.client.services import ServiceApi

    try:
        ServiceApi(LightTransport(head_url, token)).gateway_view()
    except Unreachable:
        return
