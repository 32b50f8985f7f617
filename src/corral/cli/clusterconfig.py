"""``corral cluster-config``: the head's teams, quotas, priority classes and queues; ``--reload`` re-reads them."""

from __future__ import annotations

from typing import Any

import click

from corral.cli.context import api
from corral.cli.render import duration, output_option, render, table

MEMBERS_WIDTH = 40  # characters of a team's member names shown, "and N more" included


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _members_text(members: list[str]) -> str:
    """The names, or as many as fit in ``MEMBERS_WIDTH`` characters and how many more there are."""
    text = ", ".join(members)
    if len(text) <= MEMBERS_WIDTH:
        return text or "-"
    shown = members[:1]
    for name in members[1:]:
        if len(", ".join([*shown, name])) > MEMBERS_WIDTH - len(" and 999 more"):
            break
        shown.append(name)
    rest = len(members) - len(shown)
    return f"{', '.join(shown)} and {rest} more" if rest else text  # one long name is shown whole


def _team_rows(config: dict[str, Any]) -> list[list[Any]]:
    """One row per team and GPU type it has a quota of (one row for a team with none); members on the first."""
    rows: list[list[Any]] = []
    for name, team in sorted(config["teams"].items()):
        parent = team.get("parent") or config["organisation"]
        quotas = sorted(team.get("quotas", {}).items()) or [("-", None)]
        for position, (gpu_type, quota) in enumerate(quotas):
            limits = (
                [_number(quota["nominal"]), _number(quota.get("borrowing_limit")), _number(quota.get("lending_limit"))]
                if quota is not None
                else ["-", "-", "-"]
            )
            members = _members_text(team.get("members", [])) if position == 0 else ""
            rows.append([name, parent, gpu_type, *limits, members])
    return rows


def _config_table(out: dict[str, Any]) -> None:
    config = out["config"]
    click.echo(f"cluster config: {out['path'] or '(none: no teams, quotas or classes)'}")
    if out.get("problem"):
        click.echo(
            f"the file as it is now does not validate; the config below stays in force: {out['problem']}", err=True
        )
    if teams := _team_rows(config):
        columns = ["TEAM", "PARENT", "GPU TYPE", "NOMINAL", "MAY BORROW", "MAY LEND", "MEMBERS"]
        table("teams and quotas (GPUs)", columns, teams)
    classes = [
        [name, c["value"], "yes" if c["preemptible"] else "no"]
        for name, c in sorted(config["priority_classes"].items())
    ]
    if classes:
        default = config.get("default_priority_class")
        table(f"priority classes (default: {default or 'none'})", ["CLASS", "PRIORITY", "PREEMPTIBLE"], classes)
    queues = [
        [name, _number(q.get("time_limit")), q.get("priority_class") or "-"]
        for name, q in sorted(config["queues"].items())
    ]
    if queues:
        table("queues", ["QUEUE", "DEFAULT TIME LIMIT (s)", "PRIORITY CLASS"], queues)
    _fair_share_and_speeds(config)


def _fair_share_and_speeds(config: dict[str, Any]) -> None:
    fair_share = config.get("fair_share") or {}
    weights = fair_share.get("weights") or {}
    half_life = fair_share.get("half_life")
    title = "fair share" + (f" (usage half-life {duration(half_life)})" if half_life is not None else "")
    rows = [[team, _number(weight)] for team, weight in sorted(weights.items())]
    table(title, ["TEAM", "WEIGHT"], [*rows, ["(other teams)", "1"]])
    speeds = config.get("gpu_speed") or {}
    if speeds:
        rows = [[gpu_type, _number(speed)] for gpu_type, speed in sorted(speeds.items())]
        table("GPU speeds (run-time speed, 1 = the reference)", ["GPU TYPE", "SPEED"], [*rows, ["(other types)", "1"]])


@click.command("cluster-config")
@click.option("--reload", "reload_file", is_flag=True, help="re-read the head's --config file now (admin)")
@output_option
def cluster_config(reload_file: bool, output: str) -> None:
    """Show the head's cluster config: teams and quotas, priority classes, queues, fair share, GPU speeds.

    The head re-reads its --config file when it changes; --reload does it at once and
    reports a file that does not validate (exit 2, naming each bad field) while the
    config in force stays. An empty file (or comments only) is refused the same way;
    write `{}` in it to clear the config on purpose.
    """
    client = api()
    render(output, client.reload_cluster_config() if reload_file else client.cluster_config(), _config_table)
