"""Checking a job spec on the client before it is sent, and answering with the new job's id."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click

from corral.cli.render import emit_json
from corral.client.errors import InvalidRequest


def spec_error(exc: Exception, options: Mapping[str, str] | None = None) -> InvalidRequest:
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


def validated(data: Any, source: str, options: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Validate here for a clear exit 2 even before the head is reached; send the user's own fields.
    ``options``: the command-line option behind each field, to name in errors."""
    from corral.spec import SpecError, parse_job_spec

    try:
        parse_job_spec(data, source)
    except SpecError as exc:
        raise spec_error(exc, options) from None
    return with_workdir({k: v for k, v in data.items() if k != "kind"})


def with_workdir(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its ``workdir`` on the node: the directory this command runs in when none is given, a
    relative one resolved against it, as sbatch resolves a relative ``--chdir`` (on the node, a relative
    path would be relative to wherever its agent runs), and ``~`` or ``~user`` at its start expanded to that
    home directory, as a shell would expand it on the command line."""
    workdir = body.get("workdir", os.curdir)
    if isinstance(workdir, str) and not os.path.isabs(workdir):
        body["workdir"] = os.path.abspath(os.path.expanduser(workdir))
    return body


def submitted(job: dict[str, Any], output: str) -> None:
    if output == "json":
        emit_json({"id": job["id"]})
    else:
        click.echo(job["id"])


def submitted_all(ids: list[str], output: str) -> None:
    """An array's ids: one per line, or ``{"id": first, "ids": [...]}``."""
    if output == "json":
        emit_json({"id": ids[0], "ids": ids})
    else:
        click.echo("\n".join(ids))
