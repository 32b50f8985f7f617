"""Tasks that outlive their agent: each task's record, and finding the ones still running on start.

When a task's ranks have started, the agent writes ``task.json`` into its task directory: the
desired task as the head gave it, the rendezvous port, and each rank's pid, start time, log and
exit-status file. A restarted agent finds the tasks still running by the marker in their
environment, reads their records, and reports them when it registers; the head keeps the ones it
still wants, and the agent adopts those and stops the others.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from corral.agent import launch
from corral.agent.launch.procfs import environ_value, marked_processes
from corral.api import DesiredTask, TaskReport

log = logging.getLogger(__name__)
RECORD = "task.json"
TASK_DIR_ENV = "CORRAL_TASK_DIR"


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

    def processes(self) -> list[launch.AdoptedProcess]:
        return [
            launch.AdoptedProcess(launch.ProcKey(r.pid, r.start), self.marker, Path(r.exit_file)) for r in self.ranks
        ]


def write_record(task_dir: Path, desired: DesiredTask, master_port: int, ranks: list[RankRecord]) -> None:
    """Write the task's record atomically (a reader sees all of it or none)."""
    data = {"desired": desired.model_dump(mode="json"), "master_port": master_port, "ranks": [asdict(r) for r in ranks]}
    tmp = task_dir / f".{RECORD}.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, task_dir / RECORD)


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


def find_survivors(node: str) -> tuple[list[Survivor], list[str]]:
    """Tasks of this node with live processes: those with a record, and the markers of those without.

    Blocking: reads all of ``/proc``.
    """
    survivors: list[Survivor] = []
    unknown: list[str] = []
    for marker, pids in sorted(marked_processes(f"{node}:").items()):
        task_dirs = {d for d in (environ_value(pid, TASK_DIR_ENV) for pid in pids) if d}
        found = read_record(Path(task_dirs.pop()), marker) if len(task_dirs) == 1 else None
        if found is not None and found.marker == f"{node}:{found.task_id}":
            survivors.append(found)
        else:
            unknown.append(marker)
    return survivors, unknown
