"""Tasks that outlive their agent: each task's record, and finding them again on start.

When a task's ranks have started, the agent writes ``task.json`` into its task directory: the
desired task as the head gave it, the rendezvous port, and each rank's pid, start time, log and
exit-status file; an entry in the work directory's index points at it until the head has
acknowledged the task's end. The index is one append-only journal (``live.log``): a line when a
task starts, one when the head has heard how it ended, rewritten with only the live tasks when an
agent starts and whenever it has grown long. (A file per task, created and deleted, costs a new
inode each time, which some file systems make slow under steady churn.) A restarted agent finds
the tasks still running by the marker in their environment, and the ones that ended while no agent
watched through the index; it reports both when it registers. The head keeps the running ones it
still wants (the agent adopts those and stops the others) and takes the ended ones' exit status as
if the agent had never gone.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from corral.agent import launch
from corral.agent.launch.procfs import environ_value, marked_processes
from corral.agent.watchdog import TASK_DIR_ENV
from corral.api import DesiredTask, TaskReport

log = logging.getLogger(__name__)
RECORD = "task.json"
INTERRUPTED = "interrupted"  # in a task directory: the agent stopped the task because it was shutting down
INDEX = "live.log"
LEGACY_INDEX = "live"  # a directory with a file per task, as older agents kept it
_STOP_STATUSES = (128 + 15, 128 + 9)  # SIGTERM, SIGKILL: what stopping a failed rank's siblings gives


@dataclass(frozen=True)
class RankRecord:
    rank: int
    pid: int
    start: int | None
    log_path: str
    exit_file: str


@dataclass(frozen=True)
class Survivor:
    """A task an earlier agent on this node started that still has live processes."""

    marker: str
    task_dir: Path
    desired: DesiredTask
    master_port: int
    ranks: tuple[RankRecord, ...]

    @property
    def task_id(self) -> str:
        return self.desired.task_id

    @property
    def generation(self) -> int:
        return self.desired.generation

    def report(self) -> TaskReport:
        return TaskReport(
            task_id=self.task_id, generation=self.generation, state="RUNNING", master_port=self.master_port
        )

    def final_report(self) -> TaskReport:
        """The report of a task whose ranks all ended: the first failure, preferring one that is not a
        SIGTERM or SIGKILL (those usually stopped the siblings of the rank that failed)."""
        statuses = [launch.read_exit_file(Path(r.exit_file)) for r in self.ranks]
        failures = [launch.UNRECORDED_STATUS if s is None else s for s in statuses if s != 0]
        code = min(failures, key=lambda s: s in _STOP_STATUSES) if failures else 0
        interrupted = (self.task_dir / INTERRUPTED).exists()
        if interrupted:
            detail = f"stopped: the agent was shutting down ({launch.describe_exit(code)})" if code else ""
        else:
            detail = f"{launch.describe_exit(code)} while the agent was away" if code else ""
        return TaskReport(
            task_id=self.task_id,
            generation=self.generation,
            state="EXITED",
            exit_code=code,
            detail=detail,
            master_port=self.master_port,
            interrupted=interrupted,
        )

    def processes(self) -> list[launch.AdoptedProcess]:
        return [
            launch.AdoptedProcess(launch.ProcKey(r.pid, r.start), self.marker, Path(r.exit_file)) for r in self.ranks
        ]


@dataclass
class Found:
    """What an agent finds of the tasks an earlier agent on this node ran."""

    running: list[Survivor] = field(default_factory=list)
    finished: list[Survivor] = field(default_factory=list)
    """Every process ended while no agent watched; the head has not heard how."""
    unknown: list[str] = field(default_factory=list)
    """Markers of running processes without a readable record."""


def write_record(
    task_dir: Path, desired: DesiredTask, master_port: int, ranks: list[RankRecord], index: LiveIndex
) -> None:
    """Write the task's record atomically (a reader sees all of it or none) and enter it in the index."""
    data = {"desired": desired.model_dump(mode="json"), "master_port": master_port, "ranks": [asdict(r) for r in ranks]}
    tmp = task_dir / f".{RECORD}.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, task_dir / RECORD)
    index.add(desired.task_id, task_dir)


def mark_interrupted(task_dir: Path) -> None:
    """The agent stops the task because it shuts down: should the head not hear of it now, the next agent
    reports the task's end as an interruption (its job queued again), not as a failure."""
    try:
        (task_dir / INTERRUPTED).touch()
    except OSError as exc:
        log.debug("task directory %s: %s", task_dir, exc)


def forget(index: LiveIndex, task_id: str) -> None:
    """The head knows how the task ended: a later agent need not report it."""
    index.forget(task_id)


class LiveIndex:
    """The tasks whose end the head has not acknowledged, each with its task directory: a journal of
    ``+ TASK DIR`` and ``- TASK`` lines (both quoted), appended to as tasks start and end."""

    COMPACT_AFTER = 10_000  # ended tasks' lines kept before the journal is rewritten

    def __init__(self, path: Path) -> None:
        self.path = path
        self._live: dict[str, str] | None = None  # read on first use
        self._ended = 0  # lines of ended tasks in the journal

    def entries(self) -> dict[str, Path]:
        """The live tasks and their directories; reading them rewrites the journal with only those."""
        self.compact()
        return {task_id: Path(task_dir) for task_id, task_dir in self._read().items()}

    def add(self, task_id: str, task_dir: Path) -> None:
        self._read()[task_id] = str(task_dir)
        self._append(f"+ {_entry(task_id)} {quote(str(task_dir))}\n")

    def forget(self, task_id: str) -> None:
        live = self._read()
        if live.pop(task_id, None) is None:
            return
        self._ended += 2
        if self._ended > self.COMPACT_AFTER:
            self.compact()
        else:
            self._append(f"- {_entry(task_id)}\n")

    def compact(self) -> None:
        """Rewrite the journal with the live tasks only (atomically), and fold in an older agent's index."""
        live = self._read()
        text = "".join(f"+ {_entry(task_id)} {quote(task_dir)}\n" for task_id, task_dir in live.items())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)
        self._ended = 0
        legacy = self.path.with_name(LEGACY_INDEX)
        if legacy.is_dir():
            for entry in legacy.iterdir():
                entry.unlink(missing_ok=True)
            legacy.rmdir()

    def _read(self) -> dict[str, str]:
        if self._live is None:
            self._live = {**_legacy_entries(self.path.with_name(LEGACY_INDEX)), **_journal(self.path)}
        return self._live

    def _append(self, line: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _journal(path: Path) -> dict[str, str]:
    """The live tasks a journal lists; a line cut short by a crash is ignored."""
    live: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return live
    for line in lines:
        match line.split(" "):
            case ["+", task_id, task_dir]:
                live[unquote(task_id)] = unquote(task_dir)
            case ["-", task_id]:
                live.pop(unquote(task_id), None)
    return live


def _legacy_entries(directory: Path) -> dict[str, str]:
    live: dict[str, str] = {}
    for entry in sorted(directory.iterdir()) if directory.is_dir() else []:
        try:
            live[unquote(entry.name)] = entry.read_text()
        except OSError:
            continue
    return live


def _entry(task_id: str) -> str:
    return quote(task_id, safe="")


def read_record(task_dir: Path, marker: str) -> Survivor | None:
    try:
        data = json.loads((task_dir / RECORD).read_text())
        return Survivor(
            marker=marker,
            task_dir=task_dir,
            desired=DesiredTask.model_validate(data["desired"]),
            master_port=int(data["master_port"]),
            ranks=tuple(RankRecord(**r) for r in data["ranks"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("task %s: unreadable record in %s: %s", marker, task_dir, exc)
        return None


def find_tasks(node: str, index: LiveIndex, work_dir: Path) -> Found:
    """Tasks of this node with live processes (by marker), and indexed ones whose processes all ended.

    Only processes whose task directory is under ``work_dir`` are this agent's: another cluster's
    agent on the same host may have the same node name (every ``corral up`` names its agents
    ``local-1``, ``local-2``, …), and its tasks are neither adopted nor stopped here.

    Blocking: reads all of ``/proc``.
    """
    found = Found()
    home = work_dir.resolve()
    for marker, pids in sorted(marked_processes(f"{node}:").items()):
        task_dirs = {d for d in (environ_value(pid, TASK_DIR_ENV) for pid in pids) if d}
        if not any(_under(Path(d), home) for d in task_dirs):
            continue  # another agent's task (same node name, another work directory)
        survivor = read_record(Path(task_dirs.pop()), marker) if len(task_dirs) == 1 else None
        if survivor is not None and survivor.marker == f"{node}:{survivor.task_id}":
            found.running.append(survivor)
        else:
            found.unknown.append(marker)
    running = {s.task_id for s in found.running}
    for task_id, task_dir in sorted(index.entries().items()):
        record = read_record(task_dir, "")
        if record is None:
            index.forget(task_id)
        elif record.task_id not in running:
            found.finished.append(record)
    return found


def _under(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory)
    except (OSError, RuntimeError):
        return False
