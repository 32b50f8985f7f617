"""``corral cluster-config``: the head's teams, quotas, priority classes and queues; ``--reload`` re-reads them."""

from __future__ import annotations

from typing import Any

import click

from corral.cli.context import api
from corral.cli.render import output_option, render, table


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _config_table(out: dict[str, Any]) -> None:
    config = out["config"]
    click.echo(f"cluster config: {out['path'] or '(none: no teams, quotas or classes)'}")
    if out.get("problem"):
        click.echo(
            f"the file as it is now does not validate; the config below stays in force: {out['problem']}", err=True
        )
    quotas = [
        [
            name,
            team.get("parent") or config["organisation"],
            gpu_type,
            _number(q["nominal"]),
            _number(q.get("borrowing_limit")),
            _number(q.get("lending_limit")),
            len(team.get("members", [])),
        ]
        for name, team in sorted(config["teams"].items())
        for gpu_type, q in sorted(team.get("quotas", {}).items())
    ]
    if quotas:
        table("quotas (GPUs)", ["TEAM", "PARENT", "GPU TYPE", "NOMINAL", "MAY BORROW", "MAY LEND", "MEMBERS"], quotas)
    classes = [
        [name, c["value"], "yes" if c["preemptible"] else "no"]
        for name, c in sorted(config["priority_classes"].items())
    ]
    if classes:
        table("priority classes", ["CLASS", "PRIORITY", "PREEMPTIBLE"], classes)
    queues = [
        [name, _number(q.get("time_limit")), q.get("priority_class") or "-"]
        for name, q in sorted(config["queues"].items())
    ]
    if queues:
        table("queues", ["QUEUE", "DEFAULT TIME LIMIT (s)", "PRIORITY CLASS"], queues)


@click.command("cluster-config")
@click.option("--reload", "reload_file", is_flag=True, help="re-read the head's --config file now (admin)")
@output_option
def cluster_config(reload_file: bool, output: str) -> None:
    """Show the head's cluster config: teams and quotas, priority classes, queues.

    The head re-reads its --config file when it changes; --reload does it at once and
    reports a file that does not validate (exit 2, naming each bad field) while the
    config in force stays. An empty file (or comments only) is refused the same way;
    write `{}` in it to clear the config on purpose.
    """
    client = api()
    render(output, client.reload_cluster_config() if reload_file else client.cluster_config(), _config_table)
