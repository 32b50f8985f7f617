"""Arguments that name something (a job, node, service, token): an empty name is bad usage, named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def needed(what: str, listed_by: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback refusing an empty or blank name (exit 2 naming the argument), as ``listed_by`` lists them."""

    def check(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        values = value if isinstance(value, tuple) else (value,)
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise click.BadParameter(f"{what} is needed, as `{listed_by}` lists them", param=param)
        return value

    return check


JOB = needed("a job id", "corral jobs")
NODE = needed("a node name", "corral nodes")
SERVICE = needed("a service name", "corral services")
TOKEN = needed("a token id", "corral token list")
