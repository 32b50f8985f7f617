"""Starting one task process (one rank) and following it to its exit status."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from corral.agent.launch.procfs import MARKER_ENV, ProcKey, key_of

# Processes started here and not yet reaped; ``reap_orphans`` must leave their exit status alone.
_RUNNING: dict[int, asyncio.subprocess.Process] = {}
# Starts between their fork and their entry in ``_RUNNING`` (a few turns of the event loop apart): a
# process that exits at once is meanwhile a zombie child that nothing here names yet.
_in_flight = 0


class LaunchError(Exception):
    """The process could not be started (missing executable or cwd, unwritable log, ...)."""


@dataclass(frozen=True)
class ProcessSpec:
    """What to run, and where its output goes."""

    command: str | list[str]
    """A string runs through ``/bin/sh -c``; a list is the argv, run without a shell."""
    env: Mapping[str, str]
    """The complete environment; ``CORRAL_TASK_MARKER`` is added to it."""
    cwd: Path
    log_path: Path
    """Receives stdout and stderr, interleaved, in append mode; created with its parents."""
    marker: str
    """Unique key of the task attempt, used to find every process of the task later."""


class TaskProcess(Protocol):
    """One rank's process as task supervision sees it: started here, or adopted from an earlier agent."""

    @property
    def pid(self) -> int: ...

    @property
    def key(self) -> ProcKey: ...

    async def wait(self) -> int:
        """Wait for the process to exit; its exit status (see ``exit_status``)."""
        ...


class LaunchedProcess:
    """Handle to one started process, the leader of its own session and process group."""

    def __init__(self, proc: asyncio.subprocess.Process, marker: str, key: ProcKey) -> None:
        self._proc = proc
        self.marker = marker
        self.key = key

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once known (see ``exit_status``), else ``None``."""
        code = self._proc.returncode
        return None if code is None else exit_status(code)

    async def wait(self) -> int:
        """Wait for the process to exit; its exit status (see ``exit_status``)."""
        code = await self._proc.wait()
        _RUNNING.pop(self.pid, None)
        return exit_status(code)

    def __repr__(self) -> str:
        return f"LaunchedProcess(pid={self.pid}, marker={self.marker!r}, returncode={self.returncode})"


def _shortened(text: str, limit: int = 300) -> str:
    """At most ``limit`` characters of ``text``, its middle left out: a reason stays readable."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}…({len(text) - 2 * half:,} characters)…{text[-half:]}"


def exit_status(returncode: int) -> int:
    """Shell convention: the exit code, or 128 + signal number for a process killed by a signal."""
    return 128 - returncode if returncode < 0 else returncode


def starts_in_flight() -> int:
    """How many ``start`` calls have begun and not yet recorded their process in ``running_pids``."""
    return _in_flight


def running_pids() -> set[int]:
    """Pids started by ``start`` (or ``spawn_waited``) whose exit has not been collected yet."""
    for pid, proc in list(_RUNNING.items()):
        if proc.returncode is not None:
            _RUNNING.pop(pid, None)
    return set(_RUNNING)


async def start(spec: ProcessSpec) -> LaunchedProcess:
    """Start the process in a new session, stdin from ``/dev/null``, output to the log file."""
    if isinstance(spec.command, list) and not spec.command:
        raise LaunchError("empty command")
    env = {**spec.env, MARKER_ENV: spec.marker}
    try:
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_fd = os.open(spec.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LaunchError(f"cannot open log file {spec.log_path}: {exc}") from exc
    try:
        proc = await spawn_waited(_spawn(spec.command, env, spec.cwd, log_fd))
    except OSError as exc:
        raise LaunchError(f"cannot start {_shortened(repr(spec.command))} in {spec.cwd}: {exc}") from exc
    finally:
        os.close(log_fd)
    return LaunchedProcess(proc, spec.marker, key_of(proc.pid))


async def spawn_waited(spawn: Awaitable[asyncio.subprocess.Process]) -> asyncio.subprocess.Process:
    """Start a child with ``spawn`` (one in a session of its own, which its caller waits for) and name it
    in ``running_pids`` until it is waited for, so that ``reap_orphans`` leaves its exit status alone."""
    global _in_flight
    _in_flight += 1
    try:
        proc = await spawn
        _RUNNING[proc.pid] = proc  # before the count drops (see ``reap_orphans``)
    finally:
        _in_flight -= 1
    return proc


async def _spawn(command: str | list[str], env: dict[str, str], cwd: Path, log_fd: int) -> asyncio.subprocess.Process:
    if isinstance(command, str):
        return await asyncio.create_subprocess_shell(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    return await asyncio.create_subprocess_exec(
        *command,
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
