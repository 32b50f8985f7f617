"""The agent: registers its node, follows the head's desired state, reports its tasks.

register ──▶ watch (long-poll desired state) ──▶ TaskSet.reconcile ──▶ start / stop
    ▲          heartbeat (every interval, or at once when a task changes) ──▶ reports
    └── re-register when the head declared the node lost; fence when the head is gone too long
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from corral import __version__
from corral.agent import launch, watchdog
from corral.agent.adopt import Found, Survivor, find_tasks, forget, mark_interrupted
from corral.agent.containers import ContainerRuntime, remove_left_behind
from corral.agent.containers.rank import container_names
from corral.agent.gpus import Inventory, sampler_for
from corral.agent.health import run_health_command
from corral.agent.logship import EXIT_LOGS_BUDGET_S, LogShipper, ship_within
from corral.agent.tasks import TaskSet
from corral.api import DesiredState, GpuSample, HeartbeatRequest, RegisterRequest
from corral.client.agent_api import AgentApi
from corral.client.errors import ConflictError, CorralError, NotAllowedError, NotFoundError, Unreachable

log = logging.getLogger(__name__)
WATCH_WAIT_S = 25.0
LOG_SHIP_INTERVAL_S = 0.2
FAREWELL_TIMEOUT_S = 3.0
HEALTH_TIMEOUT_S = 60.0
# Tasks of a node cut off from the head die this long before its lease ends (checked every FENCE_CHECK_S).
FENCE_MARGIN_S = 1.0
FENCE_CHECK_S = 0.2


KEPT_FOR_S = 10.0  # a node the head kept this long registers again at once when dropped
REGISTER_AGAIN_MAX_S = 30.0


def register_again_after(kept_s: float, last_delay_s: float) -> float:
    """Seconds to wait before registering again after the head dropped the node: none when it kept the
    node a while, else twice the last wait (from 1 s, at most 30 s), so a head that drops the node at
    once is not asked again and again."""
    if kept_s >= KEPT_FOR_S:
        return 0.0
    return min(REGISTER_AGAIN_MAX_S, max(1.0, last_delay_s * 2))


CREDENTIAL_FILE = "node.token"  # in the work directory: the node credential of the last registration


@dataclass(frozen=True)
class AgentOptions:
    name: str
    work_dir: Path
    labels: dict[str, str] = field(default_factory=dict)
    advertise_addr: str = ""
    heartbeat_interval_s: float | None = None  # None: what the head suggests
    cpus: float = 0.0
    memory_mb: int = 0
    health_cmd: str | None = None  # a shell command; non-zero exit marks the node unhealthy
    health_interval_s: float = 30.0
    runtime: ContainerRuntime | None = None  # runs jobs with an image; None: this node takes none


class NodeLost(Exception):
    """The head no longer accepts this node's credential or declared it lost: register again."""


class Agent:
    def __init__(self, options: AgentOptions, api: AgentApi, inventory: Inventory) -> None:
        self.options = options
        self.api = api
        self.inventory = inventory
        self.changed = asyncio.Event()
        self.tracker = launch.DescendantTracker()
        self.tasks = TaskSet(
            options.name,
            options.work_dir,
            self.changed,
            self.tracker,
            runtime=options.runtime,
            real_gpus=inventory.source == "nvml",
            visible=inventory.visible,
            devices=inventory.devices,
        )
        self.version = -1
        self.interval_s = options.heartbeat_interval_s or 2.0
        self.lease_s = 15.0
        self.last_contact = time.monotonic()
        self.sampler = sampler_for(inventory.gpus, inventory.source)
        self.health_problem = ""
        self.sampled_at = -float("inf")
        self.registered = False  # the head gave this agent a node credential
        self._farewell_failed = False
        # How this agent ends (set by the signal that stops it, see ``main``): "keep" leaves the tasks running
        # for the next agent, "stop" stops them and leaves the node; None (an error) stops them too.
        self.stopping: str | None = None

    async def run(self) -> None:
        """Serve until cancelled; on the way out, stop every task."""
        launch.become_subreaper()
        # Fences this agent's tasks should it die and stay away past its lease (see ``watchdog``).
        guard = watchdog.start(os.getpid(), self.options.name, self.options.work_dir, time.monotonic() + self.lease_s)
        found = await self._find_earlier_tasks()
        try:
            delay = 0.0
            while True:
                await self._register(found)
                found = Found()
                registered_at = time.monotonic()
                lost = await self._serve()
                log.warning("the head dropped this node (%s): stopping its tasks and registering again", lost)
                await self.tasks.stop_all("stopped: the node was declared lost")
                delay = register_again_after(time.monotonic() - registered_at, delay)
                if delay:
                    log.warning("the head dropped this node soon after it registered: waiting %.0fs first", delay)
                    await asyncio.sleep(delay)
        finally:
            if self.stopping == "keep":
                # The watchdog stays, and the beat file with it: it stops the tasks should no agent come
                # back before the lease ends.
                live = sum(1 for t in self.tasks.tasks.values() if t.state != "EXITED")
                log.info("agent exits, leaving %d task(s) running for the next agent on this node", live)
            else:
                await self._shut_down()
                await asyncio.to_thread(watchdog.stop, guard, self.options.work_dir)

    async def _shut_down(self) -> None:
        """Stop every task and leave the node. The head hears at once that the node is leaving (it places
        nothing more here and does not count the grace period as silence), hears from it while the tasks
        take their grace period, and then how each ended: interrupted, so their jobs are queued again."""
        for local in self.tasks.tasks.values():
            if local.state != "EXITED" and not local.stop_requested:
                mark_interrupted(local.task_dir)  # for the next agent to report, should the head not hear it now
        stopping = asyncio.create_task(self.tasks.stop_all("stopped: the agent is shutting down", interrupted=True))
        if not self.registered:
            await stopping
            return
        heard = await self._leaving_beat()
        while not stopping.done():
            await asyncio.wait([stopping], timeout=self.interval_s)
            if not stopping.done() and heard is not False:
                heard = await self._leaving_beat()
        await stopping
        if heard is False:
            log.warning("not reporting the last task states: the head refused this node")
            return
        await self._ship_logs()
        if await self._leaving_beat(final=True) is not True:
            log.warning("could not report the last task states to the head; the next agent here reports them")

    async def _leaving_beat(self, final: bool = False) -> bool | None:
        """Heartbeat saying this agent is leaving; True if the head heard it, None if it could not be
        reached, False if it refused this node (declared lost, or its credential replaced)."""
        reports = self.tasks.reports(hold_exit=False)
        farewell = HeartbeatRequest(tasks=reports, applied_version=self.version, leaving=True)
        sent = time.monotonic()
        try:
            async with asyncio.timeout(FAREWELL_TIMEOUT_S):
                await self.api.heartbeat(self.options.name, farewell)
        except (ConflictError, NotFoundError, NotAllowedError) as exc:
            log.warning("the head refused this node's last heartbeat: %s", exc)
            return False
        except (TimeoutError, CorralError) as exc:
            log.log(logging.DEBUG if self._farewell_failed else logging.WARNING, "heartbeat while leaving: %s", exc)
            self._farewell_failed = True
            return None
        self._contact(sent)
        if final:
            self.tasks.acknowledge(reports)  # the next agent need not report them again
        return True

    async def _find_earlier_tasks(self) -> Found:
        """Tasks an earlier agent on this node ran, to report when registering: those still running
        and those that ended meanwhile. Running ones without a readable record cannot be adopted and
        are stopped now."""
        found = await asyncio.to_thread(find_tasks, self.options.name, self.tasks.index, self.tasks.work_dir)
        for marker in found.unknown:
            log.warning("stopping %s, left running by an earlier agent without a task record", marker)
            await launch.terminate_tree([], marker, 2.0)
        for ended in found.finished:
            log.info("task %s ended while no agent ran: %s", ended.task_id, ended.final_report().exit_code)
        if self.options.runtime is not None:
            kept = {name for survivor in found.running for name in container_names(survivor.desired)}
            for name in await remove_left_behind(self.options.runtime, self.tasks.owner, kept):
                log.warning("removed container %s, left by an earlier agent: none of its tasks runs it", name)
        return found

    def _adopt(self, survivors: list[Survivor], desired: DesiredState) -> None:
        """Re-adopt the survivors the head still wants (same task and generation); the others are
        adopted only to be stopped by the reconciliation that follows."""
        wanted = {t.task_id: t for t in desired.tasks}
        for survivor in survivors:
            current = wanted.get(survivor.task_id)
            if current is not None and current.generation == survivor.generation:
                log.info("re-adopting task %s, left running by an earlier agent", survivor.task_id)
                self.tasks.adopt(survivor, current)
            else:
                log.warning("stopping task %s, left running by an earlier agent: not wanted any more", survivor.task_id)
                self.tasks.adopt(survivor, None)

    async def _register(self, found: Found) -> None:
        delay = 0.2
        while True:
            request = RegisterRequest(
                name=self.options.name,
                gpus=self.inventory.gpus,
                cpus=self.options.cpus,
                memory_mb=self.options.memory_mb,
                labels=self.options.labels,
                advertise_addr=self.options.advertise_addr,
                gpu_source=self.inventory.source,
                container_runtime=self.options.runtime.name if self.options.runtime else "",
                version=__version__,
                running=[
                    *self.tasks.reports(hold_exit=False),
                    *(s.report() for s in found.running),
                    *(s.final_report() for s in found.finished),
                ],
                node_token=self._kept_credential(),
            )
            sent = time.monotonic()
            try:
                reply = await self.api.register(request)
                break
            except Unreachable as exc:
                log.warning("head unreachable, retrying in %.1fs: %s", delay, exc)
            except ConflictError:
                # Another agent holds the node (two agents given one name): leave it to that one. Tasks an
                # earlier agent here left stay with the watchdog, which ends them with their lease.
                if found.running:
                    self.stopping = "keep"
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        self._keep_credential(reply.node_token)
        self.interval_s = self.options.heartbeat_interval_s or reply.heartbeat_interval_s
        self.lease_s = reply.lease_s
        self._contact(sent)
        self.registered = True
        self.version = -1
        log.info("registered as %s with %d GPUs (%s)", reply.node, len(self.inventory.gpus), self.inventory.source)
        self._adopt(found.running, reply.desired)
        for ended in found.finished:  # what it wrote after the last shipment, then forget it: the head has
            for rank in ended.ranks:  # its exit status now
                shipper = LogShipper(Path(rank.log_path), ended.desired.job_id, ended.generation, rank.rank)
                await shipper.ship(self.api, self.options.name)
            forget(self.tasks.index, ended.task_id)
        self._apply(reply.desired)

    def _kept_credential(self) -> str:
        """The node credential an earlier agent of this work directory got, so that a restarted agent takes
        its node back while the head still hears from it ("" when there is none)."""
        try:
            return (self.options.work_dir / CREDENTIAL_FILE).read_text().strip()
        except OSError:
            return ""

    def _keep_credential(self, token: str) -> None:
        path = self.options.work_dir / CREDENTIAL_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token)

    async def _serve(self) -> str:
        """Follow the head until it drops this node; answers why it did."""
        lost = ""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._watch())
                group.create_task(self._heartbeat())
                group.create_task(self._ship_logs_forever())
                group.create_task(self._housekeeping())
                group.create_task(self._fence_on_time())
                if self.options.health_cmd:
                    group.create_task(self._health_checks(self.options.health_cmd))
        except* NodeLost as dropped:
            lost = str(dropped.exceptions[0])
        return lost

    def _apply(self, desired: DesiredState) -> None:
        if desired.version <= self.version:
            return
        self.version = desired.version
        self.tasks.reconcile(desired.tasks, desired.stop_grace_s)

    async def _watch(self) -> None:
        while True:
            try:
                self._apply(await self.api.desired(self.options.name, self.version, WATCH_WAIT_S))
            except (NotFoundError, NotAllowedError) as exc:
                raise NodeLost(str(exc)) from None
            except CorralError as exc:
                log.debug("watch failed: %s", exc)
                await asyncio.sleep(0.5)

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self.changed.wait()
            self.changed.clear()
            # The reports and the version they answer for are taken together: the head takes a task of a
            # version the agent has applied and does not report as one the agent does not run. (A desired
            # state applied while this beat is on its way is reported with the next one.)
            reports, applied = self.tasks.reports(), self.version
            ended = [(r.task_id, self.tasks.tasks[r.task_id].shippers) for r in reports if r.state == "EXITED"]
            # A task's last lines reach the head before its exit does.
            unshipped = await ship_within(ended, self.api, self.options.name, EXIT_LOGS_BUDGET_S)
            reports = self.tasks.hold_back(reports, unshipped)
            samples = await self._samples_due()
            sent = time.monotonic()
            try:
                desired = await self.api.heartbeat(
                    self.options.name,
                    HeartbeatRequest(
                        tasks=reports, applied_version=applied, samples=samples, health_problem=self.health_problem
                    ),
                )
            except (ConflictError, NotFoundError, NotAllowedError) as exc:
                raise NodeLost(str(exc)) from None
            except CorralError as exc:
                await self._fence_if_cut_off(exc)
                continue
            self._contact(sent)  # the head heard this beat no earlier than it left
            self.tasks.acknowledge(reports)
            self._apply(desired)

    def _contact(self, sent: float) -> None:
        """The head heard what this agent sent at ``sent``: the lease runs from then (for the watchdog too)."""
        self.last_contact = sent
        with contextlib.suppress(OSError):
            # The lease's end: the agent fences FENCE_MARGIN_S before it, the watchdog (for an agent that cannot)
            # ``watchdog.FENCE_BEFORE_S`` before it, so later.
            watchdog.write_beat(self.options.work_dir, os.getpid(), sent + self.lease_s)

    async def _samples_due(self) -> list[GpuSample]:
        """GPU readings once per heartbeat interval; a beat that only reports a task change goes without,
        so that it reaches the head (and the gang's other nodes) sooner."""
        if self.sampler is None or time.monotonic() - self.sampled_at < self.interval_s:
            return []
        self.sampled_at = time.monotonic()
        return await asyncio.to_thread(self.sampler.sample, self.tasks.gpu_shares())

    async def _fence_if_cut_off(self, exc: CorralError | None = None) -> None:
        """Near the end of the lease without the head, kill every task here, at once.

        The head gives this node's jobs to other nodes once a lease has passed since it last heard
        from it, and ``last_contact`` is when this agent sent what the head last heard, never later.
        So the tasks die a margin before the lease ends, without a grace period: by then their work may
        already be starting elsewhere, and two copies of a job must never run at once."""
        silent = time.monotonic() - self.last_contact
        if exc is not None:
            log.warning("heartbeat failed (%.0fs without the head): %s", silent, exc)
        live = [t for t in self.tasks.tasks.values() if t.state != "EXITED" and not t.stop_requested]
        if silent > self.lease_s - FENCE_MARGIN_S and live:
            log.error("no contact with the head for %.1fs (lease %.0fs): killing all tasks", silent, self.lease_s)
            for local in live:
                local.grace_s = 0.0
                self.tasks.stop(local, f"fenced: no contact with the head for {silent:.0f}s")

    async def _ship_logs(self) -> None:
        for local in list(self.tasks.tasks.values()):
            for shipper in local.shippers:
                await shipper.ship(self.api, self.options.name)

    async def _ship_logs_forever(self) -> None:
        while True:
            await asyncio.sleep(LOG_SHIP_INTERVAL_S)
            await self._ship_logs()

    async def _health_checks(self, command: str) -> None:
        """Run the health command every interval; a change is reported at once."""
        while True:
            problem = await run_health_command(command, HEALTH_TIMEOUT_S)
            if problem != self.health_problem:
                log.warning("health: %s", problem or "the health command passes again")
                self.health_problem = problem
                self.changed.set()
            await asyncio.sleep(self.options.health_interval_s)

    async def _fence_on_time(self) -> None:
        """Fence on time even while a heartbeat hangs on a silent network."""
        while True:
            await asyncio.sleep(FENCE_CHECK_S)
            await self._fence_if_cut_off()

    async def _housekeeping(self) -> None:
        """Track descendants (so a task's whole tree can be killed) and reap orphans we adopted."""
        while True:
            await asyncio.sleep(0.5)
            await asyncio.to_thread(self.tracker.poll)
            await asyncio.to_thread(launch.reap_orphans, self.tasks.own_pids())
