"""Real clusters for end-to-end tests: a head and agents as subprocesses on 127.0.0.1.

``local_cluster`` (one per session) is started with ``corral up --agents 2 --fake-gpus 4xH100:80GB``
and stopped with ``corral down``; ``cluster`` hands it to one test and afterwards cancels what the
test left running and waits until every GPU is free again. ``quick_cluster`` (one per session, handed
to one module at a time, idle) is started from the daemons themselves (``corral head --grace 2`` and
one ``corral agent`` with one GPU), for tests that wait out the grace period. Every cluster lives in
its own CORRAL_HOME; when it is stopped, no process that names that directory may be left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from corral.testing.net import free_port
from corral.testing.podman import CONF_ENV, LocalPodman, prepare
from corral.testing.procs import alive, descendants, process_key, processes_mentioning, wait_for

T = TypeVar("T")

CLI_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"})


@dataclass
class Cluster:
    """A running cluster and the CLI pointed at it (through CORRAL_HOME only)."""

    home: Path
    url: str
    workspace: Path
    submitted: list[str] = field(default_factory=list)

    # helpers for tests, which cannot import this module
    wait_for = staticmethod(wait_for)
    free_port = staticmethod(free_port)
    process_key = staticmethod(process_key)
    alive = staticmethod(alive)
    processes_mentioning = staticmethod(processes_mentioning)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_HEAD", "CORRAL_TOKEN", "CORRAL_JOIN_TOKEN")}
        env["CORRAL_HOME"] = str(self.home)
        env.update(extra)
        return env

    def cli(
        self, *args: str, timeout: float = CLI_TIMEOUT_S, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "corral", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd or self.workspace,
            env=env or self.env(),
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def ok(self, *args: str, **kwargs: Any) -> str:
        """Run a command that must succeed; its stdout."""
        result = self.cli(*args, **kwargs)
        assert result.returncode == 0, f"corral {' '.join(args)} exited {result.returncode}: {result.stderr}"
        return result.stdout

    def json(self, *args: str, **kwargs: Any) -> Any:
        """Run a command with ``-o json``; its stdout must be exactly one JSON document."""
        return json.loads(self.ok(args[0], "-o", "json", *args[1:], **kwargs))

    def run(self, *options: str, command: str, cwd: Path | None = None) -> str:
        """``corral run OPTIONS -- COMMAND``; the new job's id."""
        job_id = self.json("run", *options, "--", command, cwd=cwd)["id"]
        assert isinstance(job_id, str)
        self.submitted.append(job_id)
        return job_id

    def show(self, job_id: str) -> dict[str, Any]:
        job = self.json("show", job_id)
        assert isinstance(job, dict)
        return job

    # For polling: the head's API answers through the transport the CLI uses, without the CLI's process
    # (one started for every poll takes CPU from the cluster the test waits for).
    def api(self) -> Any:
        from corral.client.calls import HeadApi
        from corral.client.light import LightTransport

        return HeadApi(LightTransport(self.url, self.config()["token"]))

    def api_job(self, job_id: str) -> dict[str, Any]:
        """The job as ``show JOB -o json`` prints it."""
        job = self.api().job(job_id)
        assert isinstance(job, dict)
        return job

    def api_nodes(self) -> list[dict[str, Any]]:
        """The nodes as ``nodes -o json`` prints them."""
        nodes = self.api().nodes()
        assert isinstance(nodes, list)
        return nodes

    def api_logs(self, job_id: str) -> str:
        """What ``logs JOB`` prints (rank 0, the latest attempt)."""
        return b"".join(self.api().logs(job_id)).decode(errors="replace")

    def api_service(self, name: str) -> dict[str, Any]:
        """The service as ``service show NAME -o json`` prints it."""
        from corral.client.light import LightTransport
        from corral.client.services import ServiceApi

        service = ServiceApi(LightTransport(self.url, self.config()["token"])).service(name)
        assert isinstance(service, dict)
        return service

    def wait(self, *job_ids: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return self.cli("wait", *job_ids, "--timeout", str(timeout), timeout=timeout + 30)

    def wait_ok(self, *job_ids: str, timeout: float = 60.0) -> None:
        result = self.wait(*job_ids, timeout=timeout)
        if result.returncode != 0:
            with self.client() as client:
                states = {j: (client.job(j)["state"], client.job(j)["reason"]) for j in job_ids}
            raise AssertionError(f"wait exited {result.returncode} ({result.stderr.strip()}); jobs: {states}")

    def config(self) -> dict[str, str]:
        data = json.loads((self.home / "client.json").read_text())
        assert isinstance(data, dict)
        return data

    def client(self) -> Any:
        from corral.client.sdk import Client

        return Client(self.url, self.config()["token"], timeout_s=30.0)

    def processes(self) -> dict[int, str]:
        """Every live process of this cluster: daemons (their command line or environment names the
        home directory) and jobs (they inherit that environment, and CORRAL_HEAD names the URL)."""
        return processes_mentioning(str(self.home), f"CORRAL_HEAD={self.url}\0")

    def settle(self, timeout_s: float = 40.0) -> None:
        """Cancel what this cluster's tests left unfinished; wait until no job is live and every GPU is free."""
        with self.client() as client:
            live = [j["id"] for j in client.jobs(include_all=True) if j["state"] not in TERMINAL]
            if live:
                client.cancel(live)

            def idle() -> bool:
                busy = [j["id"] for j in client.jobs() if j["state"] not in TERMINAL]
                held = [g for n in client.nodes() for g in n["gpus"] if g["allocated_to"]]
                return not busy and not held

            wait_for(idle, timeout_s, "the cluster to be idle", interval_s=0.2)
        self.submitted.clear()


def _reap(home: Path, leftovers: dict[int, str]) -> None:
    """SIGKILL what a stopped cluster left behind, so one failure does not leak into later runs."""
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(AssertionError):
        wait_for(lambda: not processes_mentioning(str(home)), 5.0, "killed leftovers to go")


def _new_home(tmp_path_factory: pytest.TempPathFactory, prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=tmp_path_factory.getbasetemp()))


def _require_procfs() -> None:
    if not Path("/proc/self/environ").exists():
        pytest.skip("end-to-end tests find a cluster's processes through /proc (Linux)")


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``corral up --agents 2 --fake-gpus 4xH100:80GB`` on a free port; ``corral down`` at the end."""
    _require_procfs()
    home = _new_home(tmp_path_factory, "corral-home-")
    workspace = _new_home(tmp_path_factory, "corral-work-")
    port = free_port()
    cluster = Cluster(home=home, url=f"http://127.0.0.1:{port}", workspace=workspace)
    try:
        started = cluster.cli(
            "up", "--agents", "2", "--fake-gpus", "4xH100:80GB", "--port", str(port), timeout=START_TIMEOUT_S
        )
        assert started.returncode == 0, f"corral up failed: {started.stderr}"
        assert started.stdout.strip() == cluster.url
        yield cluster
    finally:
        stopped = cluster.cli("down", timeout=START_TIMEOUT_S)
        leftovers = cluster.processes()
        if leftovers:
            _reap(home, leftovers)
        assert stopped.returncode == 0, f"corral down failed: {stopped.stderr}"
        assert not leftovers, f"processes left after corral down: {leftovers}"


@pytest.fixture
def cluster(local_cluster: Cluster) -> Iterator[Cluster]:
    """The session's cluster for one test; afterwards it is idle again."""
    local_cluster.submitted.clear()
    yield local_cluster
    local_cluster.settle()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2.0) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _spawn(cluster: Cluster, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
    log_dir = cluster.home / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / log_name).open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "corral", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=cluster.env(),
            cwd=cluster.home,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes], timeout_s: float = 30.0, sig: signal.Signals = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextlib.contextmanager
def _daemons(
    tmp_path_factory: pytest.TempPathFactory, prefix: str, head_options: list[str], agents: dict[str, str | list[str]]
) -> Iterator[tuple[Cluster, dict[str, subprocess.Popen[bytes]]]]:
    """A head started with ``head_options`` and one agent per ``agents`` entry
    (name → fake GPUs, or a list: fake GPUs, then more agent options)."""
    _require_procfs()
    home = _new_home(tmp_path_factory, prefix)
    port = free_port()
    cluster = Cluster(home=home, url=f"http://127.0.0.1:{port}", workspace=_new_home(tmp_path_factory, prefix + "w-"))
    daemons: dict[str, subprocess.Popen[bytes]] = {}
    try:
        head = _spawn(cluster, ["head", "--host", "127.0.0.1", "--port", str(port), *head_options], "head.log")
        daemons["head"] = head
        wait_for(
            lambda: head.poll() is not None or (_healthy(cluster.url) and (home / "client.json").exists()),
            START_TIMEOUT_S,
            "the head to answer",
        )
        assert head.poll() is None, (home / "logs" / "head.log").read_text()
        join_token = cluster.config()["join_token"]
        for name, options in agents.items():
            gpus, *extra = [options] if isinstance(options, str) else options
            agent_args = ["agent", "--head", cluster.url, "--token", join_token, "--name", name]
            agent_args += ["--fake-gpus", gpus, "--work-dir", str(home / "agents" / name), *extra]
            daemons[name] = _spawn(cluster, agent_args, f"agent-{name}.log")
        with cluster.client() as client:
            wait_for(
                lambda: {n["name"] for n in client.nodes() if n["state"] == "READY"} >= set(agents),
                START_TIMEOUT_S,
                "the agents to register",
                interval_s=0.2,
            )
        yield cluster, daemons
    finally:
        for name, proc in reversed(list(daemons.items())):  # agents first: they tell the head how tasks ended
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            _stop(proc, sig=signal.SIGTERM if name == "head" else signal.SIGINT)  # SIGINT: an agent stops its tasks
            del name
        # The watchdog of an agent killed earlier notices that its successor has stopped within a check (1 s).
        deadline = time.monotonic() + 3.0
        while (leftovers := cluster.processes()) and time.monotonic() < deadline:
            time.sleep(0.1)
        if leftovers:
            _reap(home, leftovers)
        assert not leftovers, f"processes left after stopping the daemons: {leftovers}"


@pytest.fixture(scope="session")
def _quick_daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with _daemons(tmp_path_factory, "corral-quick-", ["--grace", "2"], {"solo": "1xH100:80GB"}) as (cluster, _):
        yield cluster


@pytest.fixture(scope="module")
def quick_cluster(_quick_daemons: Cluster) -> Iterator[Cluster]:
    """``corral head --grace 2`` and one ``corral agent`` (node ``solo``, one fake H100), started directly;
    one for the session, handed to one module at a time, which finds it idle and leaves it idle."""
    _quick_daemons.settle()
    yield _quick_daemons
    _quick_daemons.settle()


@pytest.fixture
def lossy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    """Two one-GPU nodes (``n1``, ``n2``) under a head that declares a node lost after 2 s of silence;
    an agent that cannot reach the head for 4 s stops its tasks."""
    options = ["--node-timeout", "2", "--agent-lease", "4", "--heartbeat-interval", "0.5", "--grace", "1"]
    agents: dict[str, str | list[str]] = {"n1": "1xH100:80GB", "n2": "1xH100:80GB"}
    with _daemons(tmp_path_factory, "corral-lossy-", options, agents) as (cluster, daemons):
        yield cluster, daemons


@pytest.fixture
def health_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    """One node whose health command fails while a flag file exists; checked every 0.5 s."""
    flag = _new_home(tmp_path_factory, "corral-health-flag-") / "broken"
    agents: dict[str, str | list[str]] = {
        "hc": ["2xH100:80GB", "--health-cmd", f"test ! -e {flag}", "--health-interval", "0.5"]
    }
    with _daemons(tmp_path_factory, "corral-health-", ["--grace", "1"], agents) as (cluster, _):
        yield cluster, flag


@dataclass
class NodeControl:
    """Machine failures for a cluster started from the daemons: kill a node, bring its agent back."""

    cluster: Cluster
    daemons: dict[str, subprocess.Popen[bytes]]
    agent_gpus: dict[str, str]
    agent_options: dict[str, list[str]] = field(default_factory=dict)

    def kill_node(self, name: str) -> int:
        """SIGKILL the node's agent and every process under it, as a power cut would; how many died."""
        agent = self.daemons[name]
        victims = {agent.pid, *descendants(agent.pid)}
        victims |= set(processes_mentioning(f"CORRAL_TASK_MARKER={name}:"))
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        agent.wait(10)
        wait_for(lambda: not processes_mentioning(f"CORRAL_TASK_MARKER={name}:"), 5.0, f"node {name} to be dead")
        return len(victims)

    def kill_agent(self, name: str) -> None:
        """SIGKILL the agent process alone; its tasks keep running."""
        agent = self.daemons[name]
        agent.kill()
        agent.wait(10)

    def restart_agent(self, name: str) -> None:
        """Start the node's agent again, as before."""
        join_token = self.cluster.config()["join_token"]
        args = ["agent", "--head", self.cluster.url, "--token", join_token, "--name", name]
        args += ["--fake-gpus", self.agent_gpus[name], "--work-dir", str(self.cluster.home / "agents" / name)]
        args += self.agent_options.get(name, [])
        self.daemons[name] = _spawn(self.cluster, args, f"agent-{name}.log")


@pytest.fixture(scope="module")
def ddp_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeControl]:
    """Two nodes (``d1``, ``d2``) with two fake GPUs each, for distributed jobs with real processes.

    The head declares a node lost after 4 s of silence (heartbeats every 0.5 s); agents fence after
    6 s; the grace period is 3 s."""
    options = ["--node-timeout", "4", "--agent-lease", "6", "--heartbeat-interval", "0.5", "--grace", "3"]
    gpus = {"d1": "2xH100:80GB", "d2": "2xH100:80GB"}
    agents: dict[str, str | list[str]] = dict(gpus)
    with _daemons(tmp_path_factory, "corral-ddp-", options, agents) as (cluster, daemons):
        yield NodeControl(cluster, daemons, gpus)


@pytest.fixture(scope="module")
def restartable_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeControl]:
    """Two nodes (``r1``, ``r2``) with one fake GPU each whose agents tests may kill and start again;
    the head's default node timeout (10 s), heartbeats every 0.5 s, a 2 s grace period."""
    gpus = {"r1": "1xH100:80GB", "r2": "1xH100:80GB"}
    agents: dict[str, str | list[str]] = dict(gpus)
    options = ["--heartbeat-interval", "0.5", "--grace", "2"]
    with _daemons(tmp_path_factory, "corral-restart-", options, agents) as (cluster, daemons):
        yield NodeControl(cluster, daemons, gpus)


@pytest.fixture(scope="module")
def leaving_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeControl]:
    """One node (``s1``, one fake GPU) whose agent tests may stop and start again; the head declares a
    node lost after 3 s of silence, while a task's grace period is 5 s (heartbeats every 0.5 s)."""
    gpus = {"s1": "1xH100:80GB"}
    agents: dict[str, str | list[str]] = dict(gpus)
    options = ["--node-timeout", "3", "--agent-lease", "5", "--heartbeat-interval", "0.5", "--grace", "5"]
    with _daemons(tmp_path_factory, "corral-leave-", options, agents) as (cluster, daemons):
        yield NodeControl(cluster, daemons, gpus)


def _scoped(podman: LocalPodman, cluster: Cluster) -> LocalPodman:
    """Podman listing the containers of this cluster's agents only (not those of another run on this host)."""
    return dataclasses.replace(podman, scope=str(cluster.home.resolve()))


@pytest.fixture(scope="module")
def podman_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeControl, LocalPodman]]:
    """One node (``boxed``, one fake H100) whose agent runs jobs with an image through podman
    (``--runtime podman``, with the tests' own containers.conf and busybox image); a 2 s grace period.
    Skips, saying why, where podman cannot run containers."""
    podman = prepare(_new_home(tmp_path_factory, "corral-podman-"))
    if isinstance(podman, str):
        pytest.skip(podman)
    options = {"boxed": ["--runtime", "podman"]}
    agents: dict[str, str | list[str]] = {"boxed": ["1xH100:80GB", *options["boxed"]]}
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CONF_ENV, str(podman.conf))  # the agents, and so their podman, inherit it
        with _daemons(tmp_path_factory, "corral-podman-c-", ["--grace", "2"], agents) as (cluster, daemons):
            yield NodeControl(cluster, daemons, {"boxed": "1xH100:80GB"}, options), _scoped(podman, cluster)


@pytest.fixture(scope="module")
def podman_gang_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, LocalPodman]]:
    """Two nodes (``g1``, ``g2``, one fake H100 each) whose agents run images through podman, and one
    (``g0``, first by name) whose agent runs none."""
    podman = prepare(_new_home(tmp_path_factory, "corral-podman-"))
    if isinstance(podman, str):
        pytest.skip(podman)
    agents: dict[str, str | list[str]] = {n: ["1xH100:80GB", "--runtime", "podman"] for n in ("g1", "g2")}
    agents["g0"] = ["1xH100:80GB", "--runtime", "none"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CONF_ENV, str(podman.conf))
        with _daemons(tmp_path_factory, "corral-podman-g-", ["--grace", "2"], agents) as (cluster, _):
            yield cluster, _scoped(podman, cluster)


@pytest.fixture(scope="module")
def runtimeless_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One node (``plain``, one fake H100) whose agent runs no container images (``--runtime none``)."""
    agents: dict[str, str | list[str]] = {"plain": ["1xH100:80GB", "--runtime", "none"]}
    with _daemons(tmp_path_factory, "corral-plain-", ["--grace", "2"], agents) as (cluster, _):
        yield cluster


@pytest.fixture
def stoppable_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    """A head and one agent (``s1``, one fake H100) that the test may stop (``daemons["head"]``)."""
    agents: dict[str, str | list[str]] = {"s1": "1xH100:80GB"}
    with _daemons(tmp_path_factory, "corral-stop-", ["--grace", "1"], agents) as (cluster, daemons):
        yield cluster, daemons
