"""`corral up` and `corral down`: a local cluster (one head, N agents) under CORRAL_HOME."""

from __future__ import annotations

import json
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from corral.cli.daemons import DEFAULT_PORT, check_config, check_db, parse_prices
from corral.cli.downwait import AGENT_STOP_TIMEOUT_S, agents_stop_within
from corral.cli.localagents import agent_runtime, agent_spec, check_fake_gpus, check_runtime, running_agents
from corral.cli.localwait import Started, healthy, wait_head, wait_nodes
from corral.cli.numbers import FiniteFloatRange
from corral.cli.procs import (
    HEAD_LOCK,
    agent_runs,
    agent_work_dir,
    alive,
    free_port,
    head_holding_home,
    holds,
    log_size,
    one_at_a_time,
    port_free,
    spawn,
    stop,
)
from corral.cli.render import emit_json, output_option
from corral.client.calls import HeadApi
from corral.client.config import checked_home, corral_home, make_home, read_config_file
from corral.client.errors import CorralError, InvalidRequest, Unreachable
from corral.client.light import LightTransport
from corral.sched.describe import plain_decimal

STATE_FILE = "local-cluster.json"
STOP_TIMEOUT_S = 20.0
# Options `up` passes to the head, and the key each is remembered under in local-cluster.json's "head".
HEAD_OPTIONS = {
    "--db": "db",
    "--storage-root": "storage_root",
    "--config": "config",
    "--gpu-prices": "gpu_prices",
    "--preempt-grace": "preempt_grace",
}


def _state_path(home: Path) -> Path:
    return home / STATE_FILE


def _load_state(home: Path) -> dict[str, Any]:
    try:
        data = json.loads(_state_path(home).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(home: Path, state: dict[str, Any]) -> None:
    """Write the state, readable by its owner only (it may hold a database URL with a password)."""
    tmp = _state_path(home).with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(state, indent=2) + "\n")
    os.chmod(tmp, 0o600)  # an older file of the same name kept its mode
    os.replace(tmp, _state_path(home))


@click.command()
@click.option(
    "--agents",
    type=click.IntRange(0, 64),
    help="agents (nodes) to run  [default: as many as the last `up`, or 1]",
)
@click.option(
    "--fake-gpus",
    help="GPUs every agent pretends to have: 8xH100:80GB or 4xA100:40GB,2xL4:24GB (at most 64 GPUs; 80GB "
    "each where no memory is given; none: the GPUs NVML finds); while agents run, only theirs: `corral down` "
    "first to change it  [default: as the last `up`]",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help=f"head port  [default: the last `up`'s if free, else {DEFAULT_PORT} if free, else any free one]",
)
@click.option(
    "--db",
    "db_url",
    help="database URL: sqlite:///PATH (a relative PATH is under CORRAL_HOME) or postgresql+psycopg://USER@HOST/DB"
    "  [default: as the last `up`, or sqlite:///corral.db under CORRAL_HOME]",
)
@click.option(
    "--storage-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="where jobs' checkpoint directories go (default: CORRAL_HOME/checkpoints)",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="cluster config (YAML) for the head: teams and quotas, priority classes, queues; checked before "
    "anything starts  [default: as the last `up`, or none]",
)
@click.option(
    "--gpu-prices",
    help="price of one GPU-hour per GPU type, for `corral acct`: H100=2.5,A100=1.2 (types as nodes report them,"
    " case included)",
)
@click.option(
    "--preempt-grace",
    type=FiniteFloatRange(min=0),
    help="seconds between SIGTERM and SIGKILL on preemption and time limits  [default: 30]",
)
@click.option(
    "--runtime",
    type=click.Choice(["docker", "podman", "apptainer", "enroot", "none"]),
    help="container runtime of every agent for jobs with an image  [default: as the last `up`, or the "
    "first that answers on PATH; while agents run, only theirs]",
)
@output_option
def up(
    agents: int | None,
    fake_gpus: str | None,
    port: int | None,
    db_url: str | None,
    storage_root: Path | None,
    config_path: Path | None,
    gpu_prices: str | None,
    preempt_grace: float | None,
    runtime: str | None,
    output: str,
) -> None:
    """Start a local cluster (a head and N agents) in the background; prints the head URL
    (with -o json: {"head_url": …}).

    Running it again is harmless: what already runs is kept, missing agents are started with the
    running agents' GPUs (a different --fake-gpus exits 2: `corral down` first). State stays under
    CORRAL_HOME, so `corral down` then `corral up` resumes the cluster. The head's options are
    remembered for the next `up`; given while the head runs, they apply once it restarts.
    """
    from corral.spec import parse_gpu_groups

    if fake_gpus is not None and fake_gpus.strip().lower() == "none":
        fake_gpus = ""  # no fake GPUs: the agents started from now on report what NVML finds
    elif fake_gpus is not None:
        try:
            parse_gpu_groups(fake_gpus)
        except ValueError as exc:
            raise InvalidRequest(f"--fake-gpus: {exc}") from None
    asked = _head_options(db_url, storage_root, config_path, gpu_prices, preempt_grace)
    home = make_home()
    with one_at_a_time(home, "up.lock"):
        state = _load_state(home)
        check_fake_gpus(home, state, fake_gpus)
        check_runtime(home, state, runtime)  # a conflict with the running agents first: installing it would not help
        if runtime is not None:
            _check_runtime_works(runtime)
        url = _ensure_head(home, state, port, asked)
        config = read_config_file(home)
        api = HeadApi(LightTransport(url, config.get("token", "")))
        count = _agent_count(home, state, agents)
        since = datetime.now(UTC)
        if runtime is not None:
            state["runtime"] = runtime  # for the agents started now and by a later `up`
        names, started = _ensure_agents(home, state, url, config.get("join_token", ""), count, fake_gpus)
        _save_state(home, state)
        wait_nodes(api, names, started, since)
    if not names:
        _note("no agent runs (the last `up` ran none): `corral up --agents N` starts some")
    if output == "json":
        emit_json({"head_url": url})
    else:
        click.echo(url)


def _agent_count(home: Path, state: dict[str, Any], asked: int | None) -> int:
    """How many agents to run: ``--agents`` when given, else as many as the cluster ran after the last
    `up` (none too; 1 for a new cluster). Agents already running are never stopped by `up`, so that
    number is the larger of what it asked for and what ran; it is remembered here."""
    remembered = state.get("agent_count")
    if asked is None:
        asked = remembered if isinstance(remembered, int) else max(1, len(state.get("agents", [])))
    state["agent_count"] = max(asked, len(running_agents(home, state)))
    return asked


def _check_runtime_works(runtime: str) -> None:
    """Exit 2 when the runtime asked for is not installed or does not answer: the agents would stop at once."""
    from corral.agent.containers import find_runtime

    try:
        find_runtime(runtime)
    except ValueError as exc:
        raise InvalidRequest(f"--runtime: {exc}") from None


def _head_options(
    db_url: str | None,
    storage_root: Path | None,
    config_path: Path | None,
    gpu_prices: str | None,
    preempt_grace: float | None,
) -> dict[str, Any]:
    """The head options given, checked and in the form they are remembered in (None: not given)."""
    if config_path is not None:
        check_config(config_path)  # exit 2 naming each bad field, before anything starts
    prices = None
    if gpu_prices is not None:
        # every digit, no exponent: 1234567.5 stays that price (``:g`` made it 1.23457e+06)
        given = parse_prices(gpu_prices).items()
        prices = ",".join(f"{name}={plain_decimal(price).removesuffix('.0')}" for name, price in given)
    db = check_db(db_url, corral_home()) or None  # exit 2 naming --db; a relative SQLite path is made absolute
    if db is not None:
        from corral.head.store.dburl import probe_db

        try:
            probe_db(db)
        except ConnectionError as exc:
            raise Unreachable(f"--db: {exc}") from None
    return {
        "--db": db,
        "--storage-root": str(storage_root.resolve()) if storage_root else None,
        "--config": str(config_path.resolve()) if config_path else None,
        "--gpu-prices": prices,
        "--preempt-grace": preempt_grace,
    }


def _ensure_head(home: Path, state: dict[str, Any], port: int | None, asked: dict[str, Any]) -> str:
    head = state.get("head", {})
    if holds(head.get("pid"), home / HEAD_LOCK) and healthy(head.get("url", "")):
        _remember_for_restart(head, port, asked)
        return str(head["url"])
    other = head_holding_home(home)
    if other is not None and other == str(head.get("pid")):
        raise CorralError(
            f"the head `corral up` started (pid {other}) runs but does not answer at {head.get('url')}; "
            f"see {home / 'logs' / 'head.log'}, or `corral down` and `corral up` again"
        )
    if other is not None:
        raise CorralError(
            f"a head that `corral up` did not start (pid {other}) already runs with CORRAL_HOME {home}; "
            "use it as it is (`corral status`), or stop it where it runs and `corral up` again"
        )
    pending = head.get("next", {})
    if port and not port_free(port):
        raise InvalidRequest(f"--port: port {port} is in use; pick another or leave --port out")
    candidates = [p for p in (port, pending.get("port"), head.get("port"), DEFAULT_PORT) if p]
    chosen = next((p for p in candidates if port_free(p)), None) or free_port()
    if pending.get("port") and chosen != pending["port"] and not port:
        _note(f"port {pending['port']}, saved by an earlier --port for this start, is in use; the head takes {chosen}")
    url = f"http://127.0.0.1:{chosen}"
    args = ["head", "--host", "127.0.0.1", "--port", str(chosen)]
    remembered: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for option, key in HEAD_OPTIONS.items():
        value = next((v for v in (asked[option], pending.get(key), head.get(key)) if v is not None), None)
        remembered[key] = value
        if value is not None and option == "--db":
            secrets["CORRAL_DB"] = str(value)  # a PostgreSQL URL may hold a password: not on the command line
        elif value is not None:
            args += [option, str(value)]
    log_path = home / "logs" / "head.log"
    log_start = log_size(log_path)
    pid = spawn(args, log_path, home, secrets)
    state["head"] = {"pid": pid, "port": chosen, "url": url, **remembered}
    _save_state(home, state)
    try:
        wait_head(url, pid, log_path, log_start)
    except CorralError:
        if not alive(pid):  # it did not start: the next `up` tries what worked before, not these values
            state["head"] = {**{k: v for k, v in head.items() if k != "next"}, "pid": None}
            _save_state(home, state)
        raise
    return url


def _remember_for_restart(head: dict[str, Any], port: int | None, asked: dict[str, Any]) -> None:
    """Options given while the head runs: saved in ``head["next"]``, used when `up` next starts the head."""
    pending: dict[str, Any] = head.setdefault("next", {})
    for option, value in {"--port": port, **asked}.items():
        key = HEAD_OPTIONS.get(option, "port")
        if value is None:
            continue
        if value == head.get(key):
            pending.pop(key, None)  # back to what runs: nothing to change
            continue
        pending[key] = value
        _note(
            f"the head already runs at {head['url']}; {option} {value} applies after `corral down` and "
            "`corral up` (saved for the head's next start)"
        )
    if not pending:
        head.pop("next")


def _ensure_agents(
    home: Path, state: dict[str, Any], url: str, join_token: str, count: int, fake_gpus: str | None
) -> tuple[list[str], dict[str, Started]]:
    """Start the agents that are not running; answers all their names and the ones just started."""
    agents: list[dict[str, Any]] = state.setdefault("agents", [])
    running = running_agents(home, state)
    if running:  # agents started now get the running ones' GPUs and runtime (`up` refused any others)
        spec, runtime = agent_spec(state, running[0]), agent_runtime(state, running[0])
    else:
        spec = fake_gpus if fake_gpus is not None else str(state.get("fake_gpus") or "")
        runtime = str(state.get("runtime") or "")
    if count < len(running):
        _note(f"{len(running)} agents already run (asked for {count}); `corral down` first to run fewer")
    state["fake_gpus"] = spec
    names: list[str] = []
    started: dict[str, Started] = {}
    for index in range(max(count, len(running))):
        name = f"local-{index + 1}"
        names.append(name)
        entry = next((a for a in agents if a["name"] == name), None)
        if entry is not None and agent_runs(home, entry):
            continue
        args = ["agent", "--head", url, "--name", name]
        args += ["--work-dir", str(agent_work_dir(home, name))]
        if spec:
            args += ["--fake-gpus", spec]
        if runtime:
            args += ["--runtime", runtime]
        log_path = home / "logs" / f"agent-{name}.log"
        log_start = log_size(log_path)
        pid = spawn(args, log_path, home, {"CORRAL_JOIN_TOKEN": join_token})
        started[name] = Started(pid, agent_work_dir(home, name), log_path, log_start)
        if entry is None:
            agents.append({"name": name, "pid": pid, "fake_gpus": spec, "runtime": runtime})
        else:
            entry.update(pid=pid, fake_gpus=spec, runtime=runtime)
    return names, started


def _note(message: str) -> None:
    click.echo(f"corral up: {message}", err=True)


@click.command()
def down() -> None:
    """Stop the local cluster that `corral up` started. State stays on disk.

    A head (and agents) started by hand with this CORRAL_HOME are not `up`'s: they are left running."""
    home = checked_home()
    state = _load_state(home)
    agents = [a["pid"] for a in state.get("agents", []) if agent_runs(home, a)]
    # SIGINT: the agents stop their tasks (their jobs queued again) and leave their nodes; SIGTERM would
    # leave the tasks running for the next agent, as a restart of the agent does.
    head = state.get("head", {})
    head_ran = holds(head.get("pid"), home / HEAD_LOCK)
    within = agents_stop_within(head["url"], read_config_file(home).get("token", "")) if agents and head_ran else 0.0
    survivors = stop(agents, within or AGENT_STOP_TIMEOUT_S, signal.SIGINT)
    if head_ran:
        survivors += stop([head["pid"]], STOP_TIMEOUT_S)
    for agent in state.get("agents", []):
        agent["pid"] = None
    if head:
        head["pid"] = None
    if state:
        _save_state(home, state)
    if survivors:
        raise CorralError(f"processes {survivors} did not stop")
    if agents or head_ran:
        click.echo("stopped")
    elif (other := head_holding_home(home)) is not None:
        click.echo(
            f"nothing of its own to stop: the head running with CORRAL_HOME {home} (pid {other}) was not started "
            "by `corral up`, so it (and its agents) are left running; stop it where it runs"
        )
    else:
        click.echo("nothing was running")
