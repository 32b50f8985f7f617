"""Cluster commands: status, config, join-token, nodes."""

from __future__ import annotations

from typing import Any

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.render import ago, duration, emit_json, output_option, render, styled_state, table
from corral.client.config import load_config


def _status_table(data: dict[str, Any]) -> None:
    click.echo(f"head {data['head_url']}  version {data['version']}  up {duration(data['uptime_s'])}")
    click.echo(
        f"nodes ready {data['nodes_ready']} / {data['nodes_total']}   "
        f"GPUs free {data['gpus_free']} / {data['gpus_total']}"
    )
    if data["gpus_by_type"]:
        table(
            None, ["GPU TYPE", "FREE", "TOTAL"], [[t, c["free"], c["total"]] for t, c in data["gpus_by_type"].items()]
        )
    jobs = {s: n for s, n in data["jobs_by_state"].items() if n}
    click.echo("jobs: " + (", ".join(f"{n} {s}" for s, n in jobs.items()) if jobs else "none"))


@click.command()
@output_option
def status(output: str) -> None:
    """Head version and uptime, nodes ready, GPUs free by type, jobs by state."""
    render(output, api().status(), _status_table)


@click.command()
@output_option
def config(output: str) -> None:
    """The head URL and the token this client uses (for scripts and curl)."""
    current = load_config()
    data = {"head_url": current.head_url, "token": current.token}
    if output == "json":
        emit_json(data)
    else:
        click.echo(f"head_url: {current.head_url}\ntoken:    {current.token}")


@click.command("join-token")
@output_option
def join_token(output: str) -> None:
    """Print the token agents join with (admins only; with -o json: {"token": …}):

    corral agent --head URL --token "$(corral join-token)"
    """
    token = api().join_token()
    if output == "json":
        emit_json({"token": token})
    else:
        click.echo(token)


def _nodes_table(rows: list[dict[str, Any]]) -> None:
    out = []
    for node in rows:
        gpus = node["gpus"]
        types = sorted({g["type"] for g in gpus})
        used = sum(1 for g in gpus if g.get("allocated_to"))
        labels = ",".join(f"{k}={v}" for k, v in sorted(node["labels"].items()))
        out.append(
            [
                node["name"],
                styled_state(node["state"]),
                f"{used}/{len(gpus)}",
                "|".join(types) or "-",
                f"{node['cpus']:g}",
                node.get("container_runtime") or "-",
                node.get("address", ""),
                labels or "-",
                ago(node["last_heartbeat"]),
                node.get("reason", ""),
            ]
        )
    columns = ["NAME", "STATE", "GPUS USED", "TYPE", "CPUS", "RUNTIME", "ADDRESS", "LABELS", "HEARTBEAT", "REASON"]
    table(None, columns, out)


@click.command()
@output_option
def nodes(output: str) -> None:
    """List nodes with their state, GPUs and what holds them."""
    render(output, api().nodes(), _nodes_table)


@click.command()
@click.argument("node", callback=names.NODE)
@click.option("--reason", default="", help="why, shown in `corral nodes`")
@output_option
def drain(node: str, reason: str, output: str) -> None:
    """Stop placing new jobs on NODE (admins only); jobs already there keep running."""
    render(output, api().drain(node, reason), lambda n: click.echo(f"{n['name']}: {n['state']} ({n['reason']})"))


@click.command()
@click.argument("node", callback=names.NODE)
@output_option
def undrain(node: str, output: str) -> None:
    """Let a drained NODE take new jobs again (admins only)."""
    render(output, api().undrain(node), lambda n: click.echo(f"{n['name']}: {n['state']}"))
