"""`corral up` and `corral down`: a local cluster (one head, N agents) under CORRAL_HOME."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from corral.cli.daemons import DEFAULT_PORT
from corral.cli.render import emit_json, output_option
from corral.client.calls import HeadApi
from corral.client.config import corral_home, read_config_file
from corral.client.errors import CorralError, InvalidRequest
from corral.client.light import LightTransport

STATE_FILE = "local-cluster.json"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def _state_path(home: Path) -> Path:
    return home / STATE_FILE


def _load_state(home: Path) -> dict[str, Any]:
    try:
        data = json.loads(_state_path(home).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(home: Path, state: dict[str, Any]) -> None:
    tmp = _state_path(home).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, _state_path(home))


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _spawn(args: list[str], log_path: Path, home: Path) -> int:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CORRAL_HOME": str(home)}
    env.pop("CORRAL_HEAD", None)
    env.pop("CORRAL_TOKEN", None)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "corral", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=home,
        )
    return proc.pid


def _healthy(url: str) -> bool:
    try:
        HeadApi(LightTransport(url, timeout_s=2.0)).health()
    except CorralError:
        return False
    return True


def _wait_head(url: str, pid: int, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _healthy(url):
            return
        if not _alive(pid):
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise CorralError(f"the head exited during start-up; its log ({log_path}) ends with:\n{tail}")
        time.sleep(0.05)
    raise CorralError(f"the head did not answer at {url} within {START_TIMEOUT_S:.0f}s; see {log_path}")


def _wait_nodes(api: HeadApi, names: list[str], fresh: set[str], since: datetime) -> None:
    """Wait until every agent is READY; the ones in ``fresh`` must have registered after ``since``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready = {
            n["name"]
            for n in api.nodes()
            if n["state"] == "READY" and (n["name"] not in fresh or _heard_since(n["last_heartbeat"], since))
        }
        if set(names) <= ready:
            return
        time.sleep(0.05)
    raise CorralError(
        f"agents {', '.join(names)} did not register within {START_TIMEOUT_S:.0f}s; "
        f"see the logs under {corral_home() / 'logs'}"
    )


@click.command()
@click.option(
    "--agents",
    type=click.IntRange(0, 64),
    help="agents (nodes) to run  [default: as many as the last `up`, or 1]",
)
@click.option("--fake-gpus", help="GPUs every agent pretends to have: 8xH100:80GB or 4xA100:40GB,2xL4:24GB")
@click.option(
    "--port", type=click.IntRange(1, 65535), help=f"head port (default {DEFAULT_PORT}, or a free one if taken)"
)
@click.option("--db", "db_url", help="database URL (default: SQLite under CORRAL_HOME)")
@click.option(
    "--storage-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="where jobs' checkpoint directories go (default: CORRAL_HOME/checkpoints)",
)
@click.option(
    "--runtime",
    type=click.Choice(["docker", "podman", "apptainer", "enroot", "none"]),
    help="container runtime of every agent for jobs with an image  [default: as the last `up`, or the "
    "first that answers on PATH]",
)
@output_option
def up(
    agents: int | None,
    fake_gpus: str | None,
    port: int | None,
    db_url: str | None,
    storage_root: Path | None,
    runtime: str | None,
    output: str,
) -> None:
    """Start a local cluster (a head and N agents) in the background; prints the head URL
    (with -o json: {"head_url": …}).

    Running it again is harmless: what already runs is kept, missing agents are started.
    State stays under CORRAL_HOME, so `corral down` then `corral up` resumes the cluster.
    """
    from corral.spec import parse_gpu_groups

    if fake_gpus:
        try:
            parse_gpu_groups(fake_gpus)
        except ValueError as exc:
            raise InvalidRequest(f"--fake-gpus: {exc}") from None
    if runtime is not None:
        from corral.agent.containers import find_runtime

        try:
            find_runtime(runtime)  # the agents would stop at once: say why here
        except ValueError as exc:
            raise InvalidRequest(f"--runtime: {exc}") from None
    home = corral_home()
    home.mkdir(parents=True, exist_ok=True)
    state = _load_state(home)
    url = _ensure_head(home, state, port, db_url, storage_root)
    config = read_config_file(home)
    api = HeadApi(LightTransport(url, config.get("token", "")))
    count = agents if agents is not None else max(1, len(state.get("agents", [])))
    since = datetime.now(UTC)
    if runtime is not None:
        state["runtime"] = runtime  # for the agents started now and by a later `up`
    names, started = _ensure_agents(home, state, url, config.get("join_token", ""), count, fake_gpus)
    _save_state(home, state)
    _wait_nodes(api, names, started, since)
    if output == "json":
        emit_json({"head_url": url})
    else:
        click.echo(url)


def _heard_since(stamp: str | None, since: datetime) -> bool:
    return stamp is not None and datetime.fromisoformat(stamp.replace("Z", "+00:00")) >= since


def _ensure_head(
    home: Path, state: dict[str, Any], port: int | None, db_url: str | None, storage_root: Path | None = None
) -> str:
    head = state.get("head", {})
    if _alive(head.get("pid")) and _healthy(head.get("url", "")):
        asked = {
            "--port": port,
            "--db": db_url,
            "--storage-root": str(storage_root.resolve()) if storage_root else None,
        }
        running = {"--port": head.get("port"), "--db": head.get("db"), "--storage-root": head.get("storage_root")}
        for option, value in asked.items():
            if value is not None and value != running[option]:
                _note(f"the head already runs at {head['url']}; {option} {value} applies after `corral down`")
        return str(head["url"])
    chosen = port or head.get("port") or DEFAULT_PORT
    if not _port_free(chosen):
        if port:
            raise InvalidRequest(f"--port: port {port} is in use; pick another or leave --port out")
        chosen = _free_port()
    url = f"http://127.0.0.1:{chosen}"
    args = ["head", "--host", "127.0.0.1", "--port", str(chosen)]
    db = db_url or head.get("db")
    if db:
        args += ["--db", db]
    root = str(storage_root.resolve()) if storage_root else head.get("storage_root")
    if root:
        args += ["--storage-root", root]
    log_path = home / "logs" / "head.log"
    pid = _spawn(args, log_path, home)
    state["head"] = {"pid": pid, "port": chosen, "url": url, "db": db, "storage_root": root}
    _save_state(home, state)
    _wait_head(url, pid, log_path)
    return url


def _ensure_agents(
    home: Path, state: dict[str, Any], url: str, join_token: str, count: int, fake_gpus: str | None
) -> tuple[list[str], set[str]]:
    """Start the agents that are not running; answers all their names and the ones just started."""
    agents: list[dict[str, Any]] = state.setdefault("agents", [])
    spec = fake_gpus if fake_gpus is not None else state.get("fake_gpus")
    alive = sum(1 for a in agents if _alive(a.get("pid")))
    if alive and fake_gpus is not None and fake_gpus != state.get("fake_gpus"):
        _note(f"the {alive} running agent(s) keep their GPUs; --fake-gpus {fake_gpus} applies to agents started later")
    if count < alive:
        _note(f"{alive} agents already run (asked for {count}); `corral down` first to run fewer")
    state["fake_gpus"] = spec
    wanted = max(count, alive)
    names: list[str] = []
    started: set[str] = set()
    for index in range(wanted):
        name = f"local-{index + 1}"
        names.append(name)
        entry = next((a for a in agents if a["name"] == name), None)
        if entry is not None and _alive(entry.get("pid")):
            continue
        args = [
            "agent",
            "--head",
            url,
            "--token",
            join_token,
            "--name",
            name,
            "--work-dir",
            str(home / "agents" / name),
        ]
        if spec:
            args += ["--fake-gpus", spec]
        if state.get("runtime"):
            args += ["--runtime", state["runtime"]]
        pid = _spawn(args, home / "logs" / f"agent-{name}.log", home)
        started.add(name)
        if entry is None:
            agents.append({"name": name, "pid": pid})
        else:
            entry["pid"] = pid
    return names, started


def _note(message: str) -> None:
    click.echo(f"corral up: {message}", err=True)


def _stop(pids: list[int], timeout_s: float) -> list[int]:
    """SIGTERM each daemon's process group, wait, then SIGKILL what is left; returns survivors."""
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)
    time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


@click.command()
def down() -> None:
    """Stop the local cluster that `corral up` started. State stays on disk."""
    home = corral_home()
    state = _load_state(home)
    agents = [a["pid"] for a in state.get("agents", []) if _alive(a.get("pid"))]
    survivors = _stop(agents, STOP_TIMEOUT_S)
    head = state.get("head", {})
    if _alive(head.get("pid")):
        survivors += _stop([head["pid"]], STOP_TIMEOUT_S)
    for agent in state.get("agents", []):
        agent["pid"] = None
    if head:
        head["pid"] = None
    if state:
        _save_state(home, state)
    if survivors:
        raise CorralError(f"processes {survivors} did not stop")
    click.echo("stopped" if (agents or head) else "nothing was running")
