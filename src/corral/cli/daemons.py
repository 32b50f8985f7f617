"""Daemons for real clusters: `corral head` and `corral agent` (both in the foreground)."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import click

from corral.cli.numbers import FiniteFloatRange
from corral.client.config import corral_home, make_home
from corral.client.errors import InvalidRequest, Unreachable

DEFAULT_PORT = 8470
POSITIVE = FiniteFloatRange(min=0, min_open=True)
NOT_NEGATIVE = FiniteFloatRange(min=0)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on (0.0.0.0 for all)")
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--db",
    "db_url",
    envvar="CORRAL_DB",
    show_envvar=True,
    help="database URL (best given in CORRAL_DB: a URL with a password shows in `ps`): sqlite:///PATH"
    " (a relative PATH is under CORRAL_HOME) or postgresql+psycopg://USER@HOST/DB "
    "(default: sqlite:///corral.db under CORRAL_HOME)",
)
@click.option(
    "--public-url",
    callback=lambda _ctx, _param, value: value if value is None else _head_urls(value, single=True),
    help="URL clients and agents use to reach this head, http(s)://HOST:PORT (default: from host and port)",
)
@click.option(
    "--heartbeat-interval",
    type=POSITIVE,
    default=2.0,
    show_default=True,
    help="seconds, told to agents; at most half of --node-timeout",
)
@click.option(
    "--node-timeout",
    type=POSITIVE,
    default=10.0,
    show_default=True,
    help="seconds without a heartbeat before a node is NOT_READY",
)
@click.option(
    "--grace",
    type=NOT_NEGATIVE,
    default=10.0,
    show_default=True,
    help="seconds between SIGTERM and SIGKILL when stopping tasks (cancel, gang teardown); 0 kills at once",
)
@click.option(
    "--preempt-grace",
    type=NOT_NEGATIVE,
    default=30.0,
    show_default=True,
    help="the same on preemption and time limits, so jobs can save a checkpoint; a job's grace_period wins",
)
@click.option(
    "--agent-lease",
    type=POSITIVE,
    help="seconds an agent keeps its tasks without reaching the head; "
    "more than --node-timeout (default: node timeout + 5, at least 15)",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="cluster config (YAML): teams and quotas, priority classes, queues, fair share; re-read when it changes",
)
@click.option(
    "--policy", default="default", show_default=True, help="scheduling policy: default, fifo, priority or tiresias"
)
@click.option(
    "--storage-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="where jobs' checkpoint directories go (CORRAL_CHECKPOINT_DIR = ROOT/JOB_ID); on a real cluster a "
    "file system every node mounts at this path (default: CORRAL_HOME/checkpoints)",
)
@click.option(
    "--gpu-prices",
    default="",
    help="price of one GPU-hour per GPU type, for `corral acct`: H100=2.5,A100=1.2 (types as nodes report them,"
    " case included; types not named cost 0)",
)
@click.option(
    "--idle-after",
    default="30m",
    show_default=True,
    help="flag running jobs whose GPUs all stay under 5% utilization this long (a duration, or off)",
)
@click.option(
    "--idle-action",
    type=click.Choice(["flag", "cancel"]),
    default="flag",
    show_default=True,
    help="flag: a note in the job's reason, an event and a metric; cancel: the same as a warning, then cancel",
)
@click.option(
    "--idle-grace",
    default="15m",
    show_default=True,
    help="with --idle-action cancel: how long a warned job may stay idle before it is cancelled",
)
@click.option(
    "--ssl-certfile",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="serve HTTPS with this PEM certificate (chain); needs --ssl-keyfile",
)
@click.option(
    "--ssl-keyfile", type=click.Path(dir_okay=False, exists=True, path_type=Path), help="the certificate's private key"
)
def head(
    host: str,
    port: int,
    db_url: str | None,
    public_url: str | None,
    heartbeat_interval: float,
    node_timeout: float,
    grace: float,
    preempt_grace: float,
    agent_lease: float | None,
    config_path: Path | None,
    policy: str,
    storage_root: Path | None,
    gpu_prices: str,
    idle_after: str,
    idle_action: str,
    idle_grace: str,
    ssl_certfile: Path | None,
    ssl_keyfile: Path | None,
) -> None:
    """Run the head (control plane) in the foreground."""
    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise InvalidRequest("--ssl-certfile and --ssl-keyfile: give both, or neither")
    if ssl_certfile is not None and ssl_keyfile is not None:
        _check_tls_pair(ssl_certfile, ssl_keyfile)
    from corral.head.main import run
    from corral.head.settings import HeadSettings
    from corral.head.store.db import sqlite_url
    from corral.head.store.dburl import probe_db
    from corral.sched import POLICIES

    runnable = [name for name, p in POLICIES.items() if not p.simulation_only]
    if policy in POLICIES and policy not in runnable:
        raise InvalidRequest(
            f"--policy: {policy!r} reads traced job durations and runs only in `corral sim`, as a bound; "
            f"valid policies are {', '.join(runnable)}"
        )
    if policy not in POLICIES:
        raise InvalidRequest(f"--policy: unknown policy {policy!r}; valid policies are {', '.join(runnable)}")
    if heartbeat_interval * 2 > node_timeout:
        raise InvalidRequest(
            f"--heartbeat-interval: {heartbeat_interval:g}s must be at most half of --node-timeout "
            f"({node_timeout:g}s), so that one late heartbeat does not make a node NOT_READY"
        )
    lease = agent_lease if agent_lease is not None else max(node_timeout + 5.0, 15.0)
    if lease <= node_timeout:
        raise InvalidRequest(
            f"--agent-lease: {lease:g}s must be longer than --node-timeout ({node_timeout:g}s), so that an agent "
            "cut off from the head stops its tasks only after the head has given up on them"
        )
    prices = parse_prices(gpu_prices)
    idle_off = idle_after.strip().lower() in ("off", "0", "never")
    idle_after_s = None if idle_off else _duration("--idle-after", idle_after)
    idle_grace_s = _duration("--idle-grace", idle_grace)
    if config_path is not None:
        check_config(config_path)
    url = check_db(db_url, corral_home())
    try:
        probe_db(url)
    except ConnectionError as exc:
        raise Unreachable(f"--db: {exc}") from None
    home = make_home()
    settings = HeadSettings(
        home=home,
        db_url=url or sqlite_url(home / "corral.db"),
        host=host,
        port=port,
        public_url=public_url or "",
        heartbeat_interval_s=heartbeat_interval,
        node_timeout_s=node_timeout,
        agent_lease_s=lease,
        grace_s=grace,
        preempt_grace_s=preempt_grace,
        policy=policy,
        checkpoint_root=storage_root.resolve() if storage_root else None,
        gpu_prices=prices,
        idle_after_s=idle_after_s,
        idle_action=idle_action,
        idle_grace_s=idle_grace_s,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        config_path=config_path.resolve() if config_path is not None else None,
    )
    run(settings)


def check_config(path: Path) -> None:
    """Refuse to start on a config that does not validate, naming each bad field."""
    from corral.head.config import read_config
    from corral.spec import SpecError

    try:
        read_config(path)
    except SpecError as exc:
        problems = "\n  ".join(str(e) for e in exc.errors)
        raise InvalidRequest(f"--config: {path} is not a valid cluster config:\n  {problems}") from None


def check_db(db_url: str | None, home: Path) -> str:
    """The --db URL checked (exit 2 naming --db and what is valid), a relative SQLite path made absolute
    under ``home``; "" for the default. Reads only: nothing is created."""
    if db_url is None:
        return ""
    from corral.head.store.dburl import check_db_url

    try:
        return check_db_url(db_url, home)
    except ValueError as exc:
        raise InvalidRequest(f"--db: {exc}") from None


def _duration(option: str, value: str) -> float:
    from corral.spec import parse_duration_s

    try:
        return parse_duration_s(value)
    except ValueError as exc:
        raise InvalidRequest(f"{option}: {exc}") from None


def parse_prices(text: str) -> dict[str, float]:
    """``H100=2.5,A100=1.2`` → {"H100": 2.5, "A100": 1.2}; a clear error naming the option otherwise.

    Type names are kept as given: they match the GPU types nodes report exactly, case included, as a
    job's ``gpu_type`` and the cluster config's quotas do. Nothing (or blanks only) means no prices."""
    from corral.spec.quantities import comma_entries

    prices: dict[str, float] = {}
    expected = "expected TYPE=PRICE pairs such as H100=2.5,A100=1.2 (price per GPU-hour, a finite number, not negative)"
    try:
        parts = comma_entries(text)
    except ValueError as exc:
        raise InvalidRequest(f"--gpu-prices: {expected}, {exc}") from None
    for part in parts:
        name, sep, value = part.partition("=")
        try:
            price = float(value) if sep and name.strip() else -1.0
        except ValueError:
            price = -1.0
        if not math.isfinite(price) or price < 0:
            raise InvalidRequest(f"--gpu-prices: {expected}, got {part!r}")
        name = name.strip()
        if name in prices:
            raise InvalidRequest(
                f"--gpu-prices: {name!r} is priced twice ({name}={prices[name]:g} and {part}): give each type once"
            )
        prices[name] = price
    return prices


def _head_urls(value: str, single: bool = False) -> str:
    """The --head value, each URL checked: http(s)://HOST[:PORT], PORT 1-65535."""
    from corral.client.config import head_url_problem

    if single and "," in value:
        raise click.BadParameter(f"{value!r}: expected one URL, http://HOST:PORT (or https://)")
    for url in value.split(","):
        if problem := head_url_problem(url.strip()):
            raise click.BadParameter(problem)
    return value


@click.command()
@click.option(
    "--head",
    "head_url",
    required=True,
    envvar="CORRAL_HEAD",
    show_envvar=True,
    callback=lambda _ctx, _param, value: _head_urls(value),
    help="the head's URL; several heads sharing one database: URL1,URL2,… (fails over between them); "
    "required, here or in CORRAL_HEAD",
)
@click.option(
    "--token",
    required=True,
    envvar="CORRAL_JOIN_TOKEN",
    show_envvar=True,
    help="the join token (`corral join-token`); required, here or in CORRAL_JOIN_TOKEN",
)
@click.option("--name", default=lambda: socket.gethostname().split(".")[0], show_default="host name")
@click.option(
    "--fake-gpus",
    help="pretend to have GPUs: COUNTxTYPE[:MEMORY],… e.g. 8xH100:80GB; at most 64 GPUs, 80GB each where no "
    "MEMORY is given",
)
@click.option(
    "--labels",
    default="",
    help="topology and other labels: rack=r1,nvlink=nv0 (each key once: letters, digits, _ . - /)",
)
@click.option("--advertise-addr", help="address other nodes reach this one at (default: the one facing the head)")
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="where task directories and logs go (default: CORRAL_HOME/agents/NAME)",
)
@click.option(
    "--heartbeat-interval",
    type=POSITIVE,
    help="seconds between heartbeats (default: the head's setting); keep it well under the head's --node-timeout",
)
@click.option(
    "--health-cmd",
    help="a shell command run every --health-interval; a non-zero exit marks the node "
    "unhealthy: it gets no new work and its jobs are requeued",
)
@click.option("--health-interval", type=POSITIVE, default=30.0, show_default=True, help="seconds between health checks")
@click.option(
    "--runtime",
    type=click.Choice(["docker", "podman", "apptainer", "enroot", "none"]),
    help="the container runtime jobs with an image run through (default: the first of docker, podman, "
    "apptainer, enroot on PATH; none: this node runs no images)",
)
def agent(
    head_url: str,
    token: str,
    name: str,
    fake_gpus: str | None,
    labels: str,
    advertise_addr: str | None,
    work_dir: Path | None,
    heartbeat_interval: float | None,
    health_cmd: str | None,
    health_interval: float,
    runtime: str | None,
) -> None:
    """Run a node's agent in the foreground: report GPUs, run the tasks the head assigns."""
    import psutil

    from corral.agent.agent import AgentOptions
    from corral.agent.main import address_towards, discover_gpus, discover_runtime, run
    from corral.obs.logging import setup_logging
    from corral.spec import parse_gpu_groups, parse_labels

    try:
        if fake_gpus is not None:
            parse_gpu_groups(fake_gpus)
    except ValueError as exc:
        raise InvalidRequest(f"--fake-gpus: {exc}") from None
    try:
        parsed_labels = parse_labels(labels)
    except ValueError as exc:
        raise InvalidRequest(f"--labels: {exc}") from None
    setup_logging(f"agent:{name}")
    try:
        container_runtime = discover_runtime(runtime)
    except ValueError as exc:
        raise InvalidRequest(f"--runtime: {exc}") from None
    options = AgentOptions(
        name=name,
        work_dir=work_dir or corral_home() / "agents" / name,
        labels=parsed_labels,
        advertise_addr=advertise_addr or address_towards(head_url.split(",")[0].strip()),
        heartbeat_interval_s=heartbeat_interval,
        health_cmd=health_cmd,
        health_interval_s=health_interval,
        cpus=float(psutil.cpu_count() or 1),
        memory_mb=int(psutil.virtual_memory().total // (1024 * 1024)),
        runtime=container_runtime,
    )
    run(options, head_url, token, discover_gpus(fake_gpus, name))


def _check_tls_pair(certfile: Path, keyfile: Path) -> None:
    """The certificate (PEM) and its private key load together, before anything starts."""
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise InvalidRequest(
            f"--ssl-certfile and --ssl-keyfile: {certfile} and {keyfile} do not load as a PEM certificate and its"
            f" private key ({exc.reason if isinstance(exc, ssl.SSLError) and exc.reason else exc})"
        ) from None
