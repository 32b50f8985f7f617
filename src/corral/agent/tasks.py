"""The tasks this agent runs: start, supervise, stop, and report each one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from corral.agent import launch
from corral.agent.adopt import INDEX, LiveIndex, RankRecord, Survivor, forget, write_record
from corral.agent.containers import ContainerRuntime, remove_containers
from corral.agent.containers.rank import container_names, container_run
from corral.agent.env import HOSTFILE, hostfile_text, inherited_env, process_env
from corral.agent.gpus.base import HostDevice
from corral.agent.logship import LogShipper
from corral.api import DesiredTask, TaskReport

log = logging.getLogger(__name__)


@dataclass
class LocalTask:
    desired: DesiredTask
    marker: str
    task_dir: Path
    processes: list[launch.TaskProcess] = field(default_factory=list)
    shippers: list[LogShipper] = field(default_factory=list)
    state: str = "STARTING"  # STARTING → RUNNING → EXITED
    exit_code: int | None = None
    detail: str = ""
    stop_requested: bool = False
    interrupted: bool = False  # stopped because the agent shuts down
    master_port: int = 0  # rank 0: the rendezvous port this agent chose
    grace_s: float | None = None  # the head's grace for this stop; None: the one it started with
    supervisor: asyncio.Task[None] | None = None
    stopper: asyncio.Task[None] | None = None
    launched: asyncio.Event = field(default_factory=asyncio.Event)
    ran: bool = False  # every rank started
    never_started: bool = False  # stopped while it waited for its turn to start: no process to end
    seen_running: bool = False  # the head has acknowledged a RUNNING report

    @property
    def key(self) -> str:
        return self.desired.task_id

    def report(self, hold_exit: bool = True, logs_pending: bool = False) -> TaskReport:
        """``hold_exit``: a task that ran but ended before the head heard it run is reported RUNNING
        once first, so that the head sees every task that ran running (and its job with it).
        ``logs_pending``: its last lines have not reached the head yet, so its end waits too (it is
        reported as it was before it ended)."""
        state = "EXITED" if self.state == "EXITED" else "STARTING" if self.state == "STARTING" else "RUNNING"
        held = state == "EXITED" and (logs_pending or (hold_exit and self.ran and not self.seen_running))
        return TaskReport(
            task_id=self.key,
            generation=self.desired.generation,
            state=("RUNNING" if self.ran else "STARTING") if held else state,
            exit_code=None if held else self.exit_code,
            detail="" if held else self.detail,
            interrupted=self.interrupted,
            master_port=self.master_port,
            checkpoint_at=checkpoint_mtime(self.desired.checkpoint_dir),
        )


def _failed(local: LocalTask, status: int, local_rank: int) -> None:
    """Record the first failure of the task's processes: its exit status and what it was."""
    local.exit_code = status
    local.detail = launch.describe_exit(status)
    if len(local.processes) > 1:  # one process per GPU: say which one failed first
        local.detail += f" (the process with RANK {local.desired.rank_offset + local_rank})"


ENDED_KEPT = 4096  # ended task ids remembered; a stale desired state is seconds old, not thousands of tasks
STARTS_AT_ONCE = 8
"""Tasks being started at one time; the others wait their turn, reported STARTING. Starting a task forks
its processes in the event loop, a few milliseconds each: thousands of tasks handed out at once (a large
array of CPU-only jobs) would otherwise all fork in one turn of the loop, and hold the heartbeat and the
lease check for as many seconds, long enough for the head to declare the node lost and for the agent to
fence its own tasks."""


class TaskSet:
    """Reconciles desired tasks with running ones; calls ``changed`` whenever a report is due."""

    def __init__(
        self,
        node: str,
        work_dir: Path,
        changed: asyncio.Event,
        tracker: launch.DescendantTracker,
        runtime: ContainerRuntime | None = None,
        real_gpus: bool = False,
        visible: Mapping[int, str] | None = None,
        devices: Mapping[int, HostDevice] | None = None,
    ) -> None:
        self.node = node
        self.visible = dict(visible or {})  # CUDA_VISIBLE_DEVICES names of slots, where not their index
        self.devices = dict(devices or {})  # the host device behind each slot (passed into containers)
        self.work_dir = work_dir
        self.changed = changed
        self.tracker = tracker
        self.runtime = runtime  # runs the tasks that have an image
        self.real_gpus = real_gpus  # the GPUs are this host's devices (passed into containers)
        self.tasks: dict[str, LocalTask] = {}
        # Tasks whose end the head has heard, most recent last: a desired state read before the head
        # released one may arrive after, and must not start it again (a task id names one attempt).
        self.ended: dict[str, None] = {}
        self.index = LiveIndex(work_dir / INDEX)  # tasks whose end the head has not acknowledged (see ``adopt``)
        self._start_turns = asyncio.Semaphore(STARTS_AT_ONCE)

    def reconcile(self, desired: list[DesiredTask], stop_grace_s: Mapping[str, float] | None = None) -> None:
        """Start what is wanted and missing, stop what is running and no longer wanted.

        ``stop_grace_s`` gives, per task, a grace period other than the one it started with
        (a preempted or timed-out job gets time to checkpoint)."""
        wanted = {t.task_id: t for t in desired}
        for task_id, task in wanted.items():
            if task_id not in self.tasks and task_id not in self.ended:
                self._start(task)
        for local in list(self.tasks.values()):
            if local.key not in wanted and local.state != "EXITED" and not local.stop_requested:
                if stop_grace_s and local.key in stop_grace_s:
                    local.grace_s = stop_grace_s[local.key]
                self.stop(local, "stopped: the head no longer wants it")

    @property
    def owner(self) -> str:
        """What this agent's containers are labelled with: its node name and work directory, since another
        cluster's agent on the same host may have the same node name."""
        return f"{self.node}@{self.work_dir.resolve()}"

    def _start(self, desired: DesiredTask) -> None:
        # One directory per attempt and node, logs inside: a new directory costs a new inode, and some
        # file systems make each one slow while many files are being deleted nearby.
        task_dir = self.work_dir / "tasks" / f"{desired.job_id}.{desired.generation}.node-{desired.node_rank}"
        local = LocalTask(desired=desired, marker=f"{self.node}:{desired.task_id}", task_dir=task_dir)
        self.tasks[local.key] = local
        local.supervisor = asyncio.create_task(self._supervise(local), name=f"task {local.key}")

    def stop(self, local: LocalTask, detail: str) -> None:
        local.stop_requested = True
        if local.exit_code is None:  # a rank that failed first stays the task's reported cause
            local.detail = detail
        local.stopper = asyncio.create_task(self._terminate(local), name=f"stop {local.key}")

    async def _terminate(self, local: LocalTask) -> None:
        await local.launched.wait()  # processes still being started are stopped too
        if local.never_started:
            return
        grace_s = local.desired.grace_s if local.grace_s is None else local.grace_s
        await launch.terminate_tree(local.processes, local.marker, grace_s, tracker=self.tracker)

    async def _supervise(self, local: LocalTask) -> None:
        try:
            async with self._start_turns:  # a few tasks start at a time (see STARTS_AT_ONCE)
                started = await self._start_ranks(local) if not local.stop_requested else self._skip(local)
        finally:
            local.launched.set()
        if started:
            await self._follow(local)

    def _skip(self, local: LocalTask) -> bool:
        """The task was stopped before its turn to start came: it ends without a process, its exit unknown."""
        local.never_started = True
        local.state = "EXITED"
        self.changed.set()
        return False

    async def _start_ranks(self, local: LocalTask) -> bool:
        """Start every rank of the task; False if it could not start (it is EXITED then)."""
        try:
            await self._launch(local)
        except (OSError, launch.LaunchError) as exc:
            if local.processes:  # ranks started before the failing one must not linger
                await launch.terminate_tree(local.processes, local.marker, 0.0)
                await asyncio.gather(*(p.wait() for p in local.processes))
                await self._remove_containers(local)
            local.exit_code, local.detail = 127, f"could not start: {exc}"
            local.state = "EXITED"
            self.changed.set()
            return False
        return True

    def adopt(self, survivor: Survivor, desired: DesiredTask | None) -> None:
        """Take over a task an earlier agent on this node started (``desired``: as the head wants it now)."""
        local = LocalTask(
            desired=desired or survivor.desired,
            marker=survivor.marker,
            task_dir=survivor.task_dir,
            processes=list(survivor.processes()),
            master_port=survivor.master_port,
        )
        for rank in survivor.ranks:
            log_path = Path(rank.log_path)
            local.shippers.append(LogShipper(log_path, local.desired.job_id, local.desired.generation, rank.rank))
        local.launched.set()
        self.tasks[local.key] = local
        self.tracker.watch(local.marker, local.processes)
        local.supervisor = asyncio.create_task(self._follow(local), name=f"task {local.key}")

    async def _follow(self, local: LocalTask) -> None:
        """From the moment every rank runs until the task is over and reported."""
        local.state, local.ran = "RUNNING", True
        self.changed.set()
        first_failure, failed_at = await self._wait_all(local)
        if local.stopper is not None:
            # A rank that exits on SIGTERM (a shell wrapper) must not cut its children's grace period
            # short: the stop's own SIGTERM, grace and SIGKILL end them.
            await asyncio.wait([local.stopper])
        await launch.kill_leftovers(local.processes, local.marker, tracker=self.tracker)
        await self._remove_containers(local)
        self.tracker.forget(local.marker)
        if not local.stop_requested and first_failure:
            _failed(local, first_failure, failed_at)
        local.exit_code = first_failure or 0
        local.state = "EXITED"
        self.changed.set()

    async def _launch(self, local: LocalTask) -> None:
        desired = local.desired
        cwd = _prepare_dirs(local)
        if desired.node_rank == 0:
            fixed = desired.env.get("MASTER_PORT", "")  # the job's own rendezvous port, if it sets one
            given = fixed.isascii() and fixed.isdigit() and 0 < int(fixed) < 65536
            local.master_port = int(fixed) if given else free_port()
            if len(desired.hosts) > 1:
                self.changed.set()  # report the port now: the other nodes' ranks start while these do
                await asyncio.sleep(0.001)  # let the heartbeat go out before this loop is busy forking
        ranks = [desired.rank_offset + local_rank for local_rank in range(desired.processes)]
        specs = [self._rank_spec(local, cwd, rank) for rank in ranks]
        if desired.workdir and cwd != Path(desired.workdir):  # say so where the job's owner reads
            note = f"corral: workdir {desired.workdir} does not exist on node {self.node}; running in {cwd}\n"
            for spec in specs:
                with contextlib.suppress(OSError), spec.log_path.open("a") as log:
                    log.write(note)
        local.shippers = [
            LogShipper(spec.log_path, desired.job_id, desired.generation, rank)
            for rank, spec in zip(ranks, specs, strict=True)
        ]
        # All ranks at once: each start waits on its own child, so serial starts would add up.
        started = await asyncio.gather(*(launch.start(spec) for spec in specs), return_exceptions=True)
        local.processes.extend(p for p in started if isinstance(p, launch.LaunchedProcess))
        self.tracker.watch(local.marker, local.processes)
        for failure in started:
            if isinstance(failure, BaseException):
                raise failure
        records = [
            RankRecord(rank, p.pid, p.key.start, str(spec.log_path), str(_exit_file(local, rank)))
            for rank, p, spec in zip(ranks, local.processes, specs, strict=True)
        ]
        write_record(local.task_dir, desired, local.master_port, records, self.index)

    def _rank_spec(self, local: LocalTask, cwd: Path, rank: int) -> launch.ProcessSpec:
        desired = local.desired
        job_env = process_env(
            desired, rank - desired.rank_offset, self.node, str(local.task_dir), local.marker, {}, self.visible
        )
        if local.master_port:
            job_env["MASTER_PORT"] = str(local.master_port)
            job_env["PORT"] = desired.env.get("PORT", str(local.master_port))  # a service replica listens here
        command, env = desired.command, {**inherited_env(), **job_env}
        if desired.image is not None:
            run = container_run(
                self.runtime, desired, rank, job_env, cwd, local.task_dir, self.real_gpus, self.owner, self.devices
            )
            command, env = run.argv, {**env, **run.env}
        return launch.ProcessSpec(
            command=launch.recording_exit(command, _exit_file(local, rank)),
            env=env,
            cwd=cwd,
            log_path=local.task_dir / f"rank-{rank}.log",
            marker=local.marker,
        )

    async def _wait_all(self, local: LocalTask) -> tuple[int | None, int]:
        """Wait for every process; when one fails, the others on this node are stopped too.

        Returns the exit status of the first process to fail (None if all exited 0) and its place
        among the task's processes (its local rank).
        """
        waits = {asyncio.create_task(p.wait()): (i, p) for i, p in enumerate(local.processes)}
        pending = set(waits)
        first_failure: tuple[int, int] | None = None  # (exit status, local rank)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            failures = sorted((t.result(), waits[t][0]) for t in done if t.result() != 0)
            if failures and first_failure is None:
                first_failure = failures[0]
                if pending and not local.stop_requested:
                    # Report the failure now, while the others take their grace period: the head stops
                    # the gang's other nodes at once rather than once this node's processes are gone.
                    _failed(local, *first_failure)
                    self.changed.set()
                    await launch.terminate_tree(
                        [waits[t][1] for t in pending], local.marker, local.desired.grace_s, tracker=self.tracker
                    )
        return (None, 0) if first_failure is None else first_failure

    async def _remove_containers(self, local: LocalTask) -> None:
        """The rank's processes are gone; a container the runtime still keeps goes too."""
        if local.desired.image is not None and self.runtime is not None:
            await remove_containers(self.runtime, container_names(local.desired))

    def reports(self, hold_exit: bool = True) -> list[TaskReport]:
        return [t.report(hold_exit) for t in self.tasks.values()]

    def hold_back(self, reports: list[TaskReport], task_ids: set[str]) -> list[TaskReport]:
        """``reports`` with the ends of ``task_ids`` held back (their logs have not reached the head yet)."""
        if not task_ids:
            return reports
        held = {i: self.tasks[i].report(logs_pending=True) for i in task_ids if i in self.tasks}
        return [held.get(r.task_id, r) for r in reports]

    def acknowledge(self, sent: list[TaskReport]) -> None:
        """Forget exited tasks the head has now heard about; report at once the end of one that was held
        back until the head had heard it run."""
        for report in sent:
            local = self.tasks.get(report.task_id)
            if report.state == "RUNNING" and local is not None and not local.seen_running:
                local.seen_running = True
                if local.state == "EXITED":
                    self.changed.set()
            if report.state == "EXITED" and local is not None and local.state == "EXITED":
                del self.tasks[report.task_id]
                forget(self.index, report.task_id)
                self.ended[report.task_id] = None
                if len(self.ended) > ENDED_KEPT:
                    del self.ended[next(iter(self.ended))]

    def gpu_shares(self) -> dict[int, float]:
        """How much of each GPU the running tasks hold."""
        shares: dict[int, float] = {}
        for local in self.tasks.values():
            if local.state == "RUNNING":
                for index in local.desired.gpus:
                    shares[index] = shares.get(index, 0.0) + local.desired.gpu_fraction
        return shares

    def own_pids(self) -> set[int]:
        return {p.pid for t in self.tasks.values() for p in t.processes}

    async def stop_all(self, detail: str, interrupted: bool = False) -> None:
        for local in list(self.tasks.values()):
            if local.state != "EXITED" and not local.stop_requested:
                local.interrupted = interrupted
                self.stop(local, detail)
        supervisors = [t.supervisor for t in self.tasks.values() if t.supervisor is not None]
        if supervisors:
            await asyncio.gather(*supervisors, return_exceptions=True)


def _prepare_dirs(local: LocalTask) -> Path:
    """Create the task and checkpoint directories; return the directory to run in."""
    desired = local.desired
    local.task_dir.mkdir(parents=True, exist_ok=True)
    if desired.hosts:
        (local.task_dir / HOSTFILE).write_text(hostfile_text(desired))
    with contextlib.suppress(OSError):
        Path(desired.checkpoint_dir).mkdir(parents=True, exist_ok=True)
    if desired.workdir:
        if Path(desired.workdir).is_dir():
            return Path(desired.workdir)
        log.warning(
            "task %s: workdir %s does not exist here; running in %s", local.key, desired.workdir, local.task_dir
        )
    return local.task_dir


def _exit_file(local: LocalTask, rank: int) -> Path:
    """Where the rank's wrapper records its exit status (see ``launch.recording_exit``)."""
    return local.task_dir / f"exit-{rank}"


def free_port() -> int:
    """A TCP port free on this node right now, for the job's rendezvous (rank 0 listens on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


CHECKPOINT_MARKER = ".corral-checkpoint"


def checkpoint_mtime(checkpoint_dir: str) -> float | None:
    """When the job last touched ``CORRAL_CHECKPOINT_DIR/.corral-checkpoint``; None if it never did."""
    if not checkpoint_dir:
        return None
    try:
        return (Path(checkpoint_dir) / CHECKPOINT_MARKER).stat().st_mtime
    except OSError:
        return None
