"""Users and tokens: `corral user add|list`, `corral token create|list|revoke`, `corral whoami`."""

from __future__ import annotations

from typing import Any

import click

from corral.cli import names
from corral.cli.context import api
from corral.cli.render import ago, emit_json, output_option, render, table


@click.group()
def user() -> None:
    """Users who may use the cluster, their role and teams (admin only)."""


@user.command("add")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(["user", "admin"]),
    help="what the user may do (a new user: user; an existing one: unchanged)",
)
@click.option(
    "--team",
    "teams",
    multiple=True,
    metavar="TEAM",
    help="a team the user may submit to; repeat for several, the first is their default"
    " (a new user: default; an existing one: unchanged)",
)
@output_option
def add(name: str, role: str | None, teams: tuple[str, ...], output: str) -> None:
    """Add user NAME, or change an existing user's role and teams.

    What is left out stays as it is. A new user is a user in team `default`; when the
    cluster config lists them among a team's `members`, that team is their default. Then
    give them a token with `corral token create --user NAME`. A change that would leave
    no admin with a token is refused (exit 1).
    """
    created = api().add_user(name, role, teams)
    render(output, created, lambda u: click.echo(f"user {u['name']}: {u['role']}, teams {', '.join(u['teams'])}"))


@user.command("list")
@output_option
def list_users(output: str) -> None:
    """Every registered user."""

    def as_table(rows: list[dict[str, Any]]) -> None:
        table(None, ["USER", "ROLE", "TEAMS", "ADDED"], [_user_row(u) for u in rows])

    render(output, api().users(), as_table)


def _user_row(u: dict[str, Any]) -> list[Any]:
    return [u["name"], u["role"], ", ".join(u["teams"]), ago(u.get("created_at"))]


@click.group()
def token() -> None:
    """Bearer tokens: create one for yourself (admins: for anyone), list and revoke them."""


@token.command("create")
@click.option("--user", "for_user", metavar="USER", help="whose token (admins only; default: yourself)")
@click.option("--name", default="", help="a label to recognise the token by")
@output_option
def create(for_user: str | None, name: str, output: str) -> None:
    """Create a token. The secret is printed once: the head keeps only its hash."""
    made = api().create_token(for_user, name)
    if output == "json":
        emit_json(made)
        return
    click.echo(made["token"])
    click.echo(
        f"token {made['id']} for {made['user']} ({made['role']}); use it with CORRAL_TOKEN, "
        f"revoke it with `corral token revoke {made['id']}`",
        err=True,
    )


@token.command("list")
@output_option
def list_tokens(output: str) -> None:
    """Your tokens (admins: everyone's): ids and labels, never the secrets."""

    def as_table(rows: list[dict[str, Any]]) -> None:
        table(None, ["ID", "USER", "ROLE", "NAME", "CREATED"], [_token_row(t) for t in rows])

    render(output, api().tokens(), as_table)


def _token_row(t: dict[str, Any]) -> list[Any]:
    return [t["id"], t["user"], t["role"], t["name"], ago(t.get("created_at"))]


@token.command("revoke")
@click.argument("token_id", metavar="TOKEN_ID", callback=names.TOKEN)
@output_option
def revoke(token_id: str, output: str) -> None:
    """Revoke a token by its id (from `corral token list`): yours, or (admins) anyone's."""
    gone = api().revoke_token(token_id)
    render(output, gone, lambda t: click.echo(f"token {t['id']} of {t['user']} revoked"))


@click.command()
@output_option
def whoami(output: str) -> None:
    """The user, role and teams of the token in use."""
    me = api().whoami()
    render(output, me, lambda m: click.echo(f"{m['user']} ({m['role']}), teams: {', '.join(m['teams']) or 'any'}"))
