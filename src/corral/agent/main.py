"""`corral agent`: run a node's agent in the foreground."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from urllib.parse import urlsplit

from pydantic import ValidationError

from corral import pidlock
from corral.agent.agent import Agent, AgentOptions
from corral.agent.containers import RUNTIMES, ContainerRuntime, find_runtime
from corral.agent.gpus import FakeGpus, Inventory, NvmlGpus
from corral.api import RegisterRequest
from corral.client.agent_api import AgentApi
from corral.client.config import check_token, checked_home, corral_home, dir_problem
from corral.client.errors import InvalidRequest

log = logging.getLogger(__name__)


def discover_gpus(fake_gpus: str | None, node: str) -> Inventory:
    if fake_gpus:
        return FakeGpus(fake_gpus, node).discover()
    inventory = NvmlGpus().discover()
    if not inventory.gpus:
        log.warning(
            "no GPU found (%s); running CPU-only jobs. Pass --fake-gpus 8xH100:80GB to pretend.", inventory.note
        )
    return inventory


def discover_runtime(requested: str | None) -> ContainerRuntime | None:
    """The container runtime for jobs with an image, said once in the log; ValueError if the one asked
    for cannot be used."""
    found = find_runtime(requested)
    for name, problem in found.passed_over.items():
        log.warning("not using %s for jobs with an image: %s", name, problem)
    runtime = found.runtime
    if runtime is not None:
        log.info("running jobs with an image through %s", runtime.name)
    elif requested is None:
        log.warning(
            "no container runtime found (none of %s on PATH answers): jobs with an image will not run on "
            "this node; install one, or pass --runtime",
            ", ".join(RUNTIMES),
        )
    else:
        log.info("no container runtime (--runtime %s): jobs with an image will not run on this node", requested)
    return runtime


def address_towards(head_url: str) -> str:
    """The local address this machine uses to reach the head (no packet is sent)."""
    parts = urlsplit(head_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(info[0], socket.SOCK_DGRAM) as probe:
            probe.connect(info[4])
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def check_name(name: str) -> None:
    """Refuse a node name the head would refuse, before anything is written (the name is part of the
    default work directory's path)."""
    try:
        RegisterRequest.model_validate({"name": name, "cpus": 0, "memory_mb": 0})
    except ValidationError:
        raise InvalidRequest(
            f"--name {name!r}: a node name is 1 to 63 letters, digits, _ . - and starts with a letter or digit"
        ) from None


def run(options: AgentOptions, head_url: str, token: str, inventory: Inventory) -> None:
    check_token(token, "--token (or CORRAL_JOIN_TOKEN)")  # before anything is written or sent
    check_name(options.name)
    _make_work_dir(options)
    _lock_work_dir(options)  # held while this process lives
    _watch_children_by_pidfd()
    asyncio.run(_main(options, head_url, token, inventory))


def _work_dir_given(options: AgentOptions) -> bool:
    """Whether --work-dir named the work directory, rather than --name under CORRAL_HOME/agents."""
    return options.work_dir != corral_home() / "agents" / options.name


def _make_work_dir(options: AgentOptions) -> None:
    """Create the work directory; exit 2 naming --work-dir, or CORRAL_HOME where it is derived from it."""
    given = _work_dir_given(options)
    if not given:
        checked_home()
    try:
        options.work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = dir_problem(options.work_dir) or f"cannot create the directory {options.work_dir}: {exc.strerror}"
        raise InvalidRequest(f"{'--work-dir' if given else 'CORRAL_HOME'}: {problem}") from None


def _lock_work_dir(options: AgentOptions) -> int:
    """Refuse to start beside another agent of the same work directory (the same --work-dir, or the same
    --name under the same CORRAL_HOME): the two would adopt, report and stop each other's tasks."""
    try:
        return pidlock.hold(options.work_dir / "agent.lock")
    except pidlock.Held as held:
        if _work_dir_given(options):
            raise InvalidRequest(
                f"--work-dir {options.work_dir}: another agent (pid {held.holder}) already runs with this work "
                "directory; stop it first, or give this one another --work-dir"
            ) from None
        raise InvalidRequest(
            f"--name {options.name!r}: another agent (pid {held.holder}) already runs with the work directory "
            f"{options.work_dir}; stop it first, or give this one another --name"
        ) from None


def _watch_children_by_pidfd() -> None:
    """Learn of task exits through pidfds in the event loop, not a thread per task (Python 3.11 starts a
    waiting thread per child by default; 3.12 and later use pidfds on their own where Linux has them)."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return  # a kernel without pidfd_open: keep the default
    asyncio.set_child_watcher(asyncio.PidfdChildWatcher())


async def _main(options: AgentOptions, head_url: str, token: str, inventory: Inventory) -> None:
    api = AgentApi(head_url, token)
    agent = Agent(options, api, inventory)
    runner = asyncio.create_task(agent.run())
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        """SIGTERM (``systemctl stop`` and ``restart``): the agent exits and leaves its tasks running for
        the next agent (its watchdog stops them should none come back within the lease). SIGINT (Ctrl-C,
        ``corral down``): the agent stops its tasks, tells the head, and leaves the node. The first signal
        decides; later ones are ignored."""
        if agent.stopping is not None:
            log.info("%s: already stopping", sig.name)
            return
        agent.stopping = "stop" if sig == signal.SIGINT else "keep"
        runner.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await runner
    except asyncio.CancelledError:
        log.info("agent stopped")
    finally:
        await api.close()
    if agent.stopping == "keep":
        # Closing the event loop would kill the task processes it still tracks (asyncio ends the children
        # of its subprocess transports): leave without closing it, as an agent killed outright would.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
