"""The ``corral`` command: a click group whose subcommands load on first use.

Start-up time matters (``corral jobs`` should answer in well under 150 ms), so only
click is imported up front; each command imports what it needs when it runs.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from typing import Any

import click

from corral import __version__
from corral.client.errors import CorralError

COMMANDS: dict[str, str] = {
    "up": "corral.cli.local:up",
    "down": "corral.cli.local:down",
    "status": "corral.cli.cluster:status",
    "config": "corral.cli.cluster:config",
    "join-token": "corral.cli.cluster:join_token",
    "nodes": "corral.cli.cluster:nodes",
    "drain": "corral.cli.cluster:drain",
    "undrain": "corral.cli.cluster:undrain",
    "events": "corral.cli.events:events",
    "acct": "corral.cli.acct:acct",
    "dashboard": "corral.cli.dashboard:dashboard",
    "top": "corral.cli.top:top",
    "head": "corral.cli.daemons:head",
    "agent": "corral.cli.daemons:agent",
    "submit": "corral.cli.jobs:submit",
    "run": "corral.cli.run:run",
    "jobs": "corral.cli.jobs:jobs",
    "show": "corral.cli.jobs:show",
    "logs": "corral.cli.logs:logs",
    "wait": "corral.cli.jobs:wait",
    "cancel": "corral.cli.cancel:cancel",
    "why": "corral.cli.why:why",
    "cluster-config": "corral.cli.clusterconfig:cluster_config",
    "preempt": "corral.cli.preempt:preempt",
    "checkpoint-done": "corral.cli.preempt:checkpoint_done",
    "sim": "corral.cli.sim:sim",
    "serve": "corral.cli.serve:serve",
    "services": "corral.cli.serve:services",
    "service": "corral.cli.serve:service",
    "gateway": "corral.cli.serve:gateway",
    "user": "corral.cli.users:user",
    "token": "corral.cli.users:token",
    "whoami": "corral.cli.users:whoami",
}


class ClosedOutput(Exception):
    """Stdout's reader went away (``corral sim -o json | head -c 10``): not an error of the command's.
    Click would end such a run with status 1 itself; this reaches ``main`` instead."""


class LazyGroup(click.Group):
    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:  # --help and --version print here, before any command runs
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError as exc:
            raise ClosedOutput from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise ClosedOutput from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="corral")
def cli() -> None:
    """Corral: one GPU cluster from many GPU servers.

    Start a local cluster with `corral up`, submit work with `corral run` or
    `corral submit`, and watch it with `corral jobs`, `corral logs` and `corral nodes`.
    CORRAL_HOME (default ~/.corral) holds the local cluster; CORRAL_HEAD and
    CORRAL_TOKEN point the client at another head.
    """


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI, turning client errors into their documented exit codes."""
    try:
        result = cli.main(args=argv, prog_name="corral", standalone_mode=False)
        sys.stdout.flush()  # here, where a reader that went away is caught, rather than on exit
        return result
    except (ClosedOutput, BrokenPipeError):
        # A closed pipe ends the output the reader wanted: quietly, with status 0 (docs/cli.md, Exit codes).
        _flush_or_drop_stdout()
        sys.exit(0)
    except CorralError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except OSError as exc:
        if exc.errno not in _FULL_OUTPUT:
            raise
        _flush_or_drop_stdout()
        where = f" {exc.filename}" if exc.filename else ""
        click.echo(f"error: cannot write{where}: {exc.strerror}", err=True)
        sys.exit(1)


# What a write raises where there is no room (a full disk or quota, a file past its size limit) or the
# device fails: to stdout (`corral sim -o json > /dev/full`) as to any file.
_FULL_OUTPUT = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _flush_or_drop_stdout() -> None:
    """Flush stdout, or when that fails too (it is what is full), point it at /dev/null, so that what is
    still buffered for it does not fail again on exit, with a traceback of its own."""
    try:
        sys.stdout.flush()
    except OSError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no real stdout (a test's capture): nothing will be flushed on exit
            pass
