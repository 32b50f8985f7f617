"""A real head (FastAPI app, fake clock) driven through its HTTP API, on each database backend.

Every test that takes ``head`` or ``start_head`` runs twice: on a SQLite file (a new one is a
copy of a migrated one) and on a real PostgreSQL server (one throw-away server per session, with
one migrated database that is emptied for each test). Where no server can start, the PostgreSQL
half skips with the reason.

Loops do not run: tests call a scheduling cycle or a liveness check when they want
one. Agents are simulated by calling the agent API with their node tokens.
"""

from __future__ import annotations

import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from httpx import Client, Response

from corral.head.app import create_app
from corral.head.runtime import HeadRuntime
from corral.head.security import Role, hash_token
from corral.head.services.liveness import check_nodes, check_time_limits, end_fenced_failures
from corral.head.services.scheduling import CycleResult, run_cycle
from corral.head.settings import HeadSettings
from corral.head.store.db import Database, sqlite_url
from corral.head.store.tables import TokenRow
from corral.sched import get_policy
from corral.testing import FakeClock
from corral.testing.net import free_port
from corral.testing.postgres import PostgresServer, unavailable_reason

with warnings.catch_warnings():
    # Newer starlette prefers the httpx2 package for its test client; plain httpx still works.
    warnings.filterwarnings("ignore", message=r".*httpx2")
    from fastapi.testclient import TestClient

NODE_TIMEOUT_S = 10.0


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def run_cli(
    head: Head, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """``corral ARGS`` in this process against a head served over HTTP (``served_head``), as its admin: the
    exit code, stdout and stderr."""
    from corral.cli.main import main

    monkeypatch.setenv("CORRAL_HEAD", str(head.client.base_url).rstrip("/"))
    monkeypatch.setenv("CORRAL_TOKEN", head.admin_token)
    monkeypatch.setenv("CORRAL_HOME", str(head.home / "client"))
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@dataclass
class Agent:
    """One simulated agent: registers, heartbeats with task reports, reads its desired state."""

    head: Head
    name: str
    token: str
    applied: int = -1

    def heartbeat(self, tasks: list[dict[str, Any]] | None = None, applied: int | None = None) -> Response:
        body = {"tasks": tasks or [], "applied_version": self.applied if applied is None else applied}
        return self.head.client.post(f"/v1/agents/{self.name}/heartbeat", json=body, headers=auth(self.token))

    def beat(self, tasks: list[dict[str, Any]] | None = None, applied: int | None = None) -> dict[str, Any]:
        """A heartbeat that must succeed; remembers the version it answered as applied."""
        response = self.heartbeat(tasks, applied)
        assert response.status_code == 200, response.text
        desired: dict[str, Any] = response.json()
        self.applied = desired["version"]
        return desired

    def desired(self, **params: Any) -> dict[str, Any]:
        response = self.head.client.get(f"/v1/agents/{self.name}/desired", params=params, headers=auth(self.token))
        assert response.status_code == 200, response.text
        out: dict[str, Any] = response.json()
        return out

    def tasks(self) -> list[dict[str, Any]]:
        tasks: list[dict[str, Any]] = self.desired()["tasks"]
        return tasks

    def run_all(self) -> list[dict[str, Any]]:
        """Start every desired task: report them RUNNING."""
        desired = self.desired()
        self.applied = desired["version"]
        reports = [running(t) for t in desired["tasks"]]
        self.beat(reports)
        return reports


def running(task: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": task["task_id"], "generation": task["generation"], "state": "RUNNING"}


def exited(task: dict[str, Any], code: int, detail: str = "") -> dict[str, Any]:
    return {
        "task_id": task["task_id"],
        "generation": task["generation"],
        "state": "EXITED",
        "exit_code": code,
        "detail": detail,
    }


@dataclass
class Head:
    app: FastAPI
    client: Client  # a TestClient, or an httpx client of a head served on a port
    clock: FakeClock
    home: Path
    admin_token: str
    agents: dict[str, Agent] = field(default_factory=dict)

    # Helpers for test modules (conftest is not importable under --import-mode=importlib).
    auth = staticmethod(auth)
    running = staticmethod(running)
    exited = staticmethod(exited)

    @property
    def rt(self) -> HeadRuntime:
        rt: HeadRuntime = self.app.state.runtime
        return rt

    @property
    def admin(self) -> dict[str, str]:
        return auth(self.admin_token)

    def join_token(self) -> str:
        response = self.client.get("/v1/join-token", headers=self.admin)
        assert response.status_code == 200, response.text
        token: str = response.json()["token"]
        return token

    def register(
        self,
        name: str,
        gpus: int = 8,
        gpu_type: str = "H100",
        addr: str | None = None,
        running: list[dict[str, Any]] | None = None,
        cpus: float = 64,
        memory_mb: int = 512 * 1024,
        labels: dict[str, str] | None = None,
        container_runtime: str = "",
    ) -> Agent:
        body = {
            "name": name,
            "gpus": [{"index": i, "type": gpu_type, "memory_mb": 80 * 1024} for i in range(gpus)],
            "cpus": cpus,
            "memory_mb": memory_mb,
            "labels": labels or {},
            "advertise_addr": addr if addr is not None else f"10.0.0.{len(self.agents) + 1}",
            "gpu_source": "fake",
            "running": running or [],
            "container_runtime": container_runtime,
            # The same simulated agent registering again (a restart) shows the credential it kept.
            "node_token": self.agents[name].token if name in self.agents else "",
        }
        response = self.client.post("/v1/agents/register", json=body, headers=auth(self.join_token()))
        assert response.status_code == 200, response.text
        data = response.json()
        agent = Agent(self, name, data["node_token"], applied=data["desired"]["version"])
        self.agents[name] = agent
        return agent

    def submit(self, spec: dict[str, Any], token: str | None = None, **headers: str) -> dict[str, Any]:
        response = self.client.post("/v1/jobs", json=spec, headers={**auth(token or self.admin_token), **headers})
        assert response.status_code == 201, response.text
        job: dict[str, Any] = response.json()
        return job

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/jobs/{job_id}", headers=self.admin)
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return job

    def jobs(self) -> list[dict[str, Any]]:
        response = self.client.get("/v1/jobs", params={"all": "true"}, headers=self.admin)
        assert response.status_code == 200, response.text
        jobs: list[dict[str, Any]] = response.json()
        return jobs

    def nodes(self) -> dict[str, dict[str, Any]]:
        response = self.client.get("/v1/nodes", headers=self.admin)
        assert response.status_code == 200, response.text
        return {n["name"]: n for n in response.json()}

    def free_gpus(self, node: str) -> list[int]:
        return [g["index"] for g in self.nodes()[node]["gpus"] if g["allocated_to"] is None]

    def cancel(self, job_id: str) -> dict[str, Any]:
        response = self.client.post(f"/v1/jobs/{job_id}/cancel", headers=self.admin)
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return job

    def cycle(self) -> CycleResult:
        return run_cycle(self.rt, get_policy("default"))

    def check_nodes(self) -> list[str]:
        return check_nodes(self.rt)

    def check_time_limits(self) -> list[str]:
        return check_time_limits(self.rt)

    def end_fenced_failures(self) -> list[str]:
        return end_fenced_failures(self.rt)

    def user_token(self, user: str = "alice", role: Role = Role.USER) -> str:
        """A token for a non-admin user, written straight into the token table."""
        token = f"cu_test_{user}"
        with self.rt.write() as session:
            session.add(
                TokenRow(hash=hash_token(token), user=user, role=role.value, name=user, created_at=self.clock.now())
            )
        return token


def make_settings(home: Path, **overrides: Any) -> HeadSettings:
    options: dict[str, Any] = {
        "home": home,
        "db_url": sqlite_url(home / "corral.db"),
        "write_client_config": True,
        "node_timeout_s": NODE_TIMEOUT_S,
        "grace_s": 5.0,
        "port": 8470,
    }
    options.update(overrides)
    return HeadSettings(**options)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@contextmanager
def open_head(home: Path, clock: FakeClock, **overrides: Any) -> Iterator[Head]:
    """Start a head on ``home`` (lifespan: migrations, tokens) and stop it on exit."""
    app = create_app(make_settings(home, **overrides), clock=clock, run_loops=False)
    with TestClient(app) as client:
        yield Head(app=app, client=client, clock=clock, home=home, admin_token=app.state.admin_token)


@contextmanager
def serve_head(home: Path, clock: FakeClock, **overrides: Any) -> Iterator[Head]:
    """A head served by uvicorn on a free 127.0.0.1 port, for commands of the CLI, which speak real HTTP."""
    port = free_port()
    app = create_app(make_settings(home, port=port, **overrides), clock=clock, run_loops=False)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test-head", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test head did not start")
        time.sleep(0.01)
    try:
        with Client(base_url=f"http://127.0.0.1:{port}") as client:
            yield Head(app=app, client=client, clock=clock, home=home, admin_token=app.state.admin_token)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def served_head(tmp_path: Path, clock: FakeClock) -> Callable[..., AbstractContextManager[Head]]:
    """Starts a head on SQLite served over HTTP: ``with served_head(gpu_prices=…) as head``."""

    def start(**overrides: Any) -> AbstractContextManager[Head]:
        return serve_head(tmp_path / "served", clock, **overrides)

    return start


TEST_DB = "corral_tests"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session, with one migrated database the tests share."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL half skipped: {reason}")
    server = PostgresServer.start()
    try:
        database = Database(server.create_database(TEST_DB))
        database.migrate()
        database.close()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> str:
    """The shared PostgreSQL database, emptied for this test (much faster than a new database each)."""
    server: PostgresServer = request.getfixturevalue("postgres_server")
    server.empty_tables(TEST_DB)
    return server.url(TEST_DB)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str | None:
    """The database the test's head uses: None for the SQLite file under its home."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database: a head that starts on a new one gets a copy (the head's own migration
    then finds nothing to do, as on a restart), which is faster than migrating it."""
    path = tmp_path_factory.mktemp("sqlite-template") / "corral.db"
    database = Database(sqlite_url(path))
    database.migrate()
    database.close()  # the last connection's close writes the WAL back: the one file holds it all
    return path


@pytest.fixture
def start_head(db_url: str | None, request: pytest.FixtureRequest) -> Callable[..., AbstractContextManager[Head]]:
    def start(home: Path, clock: FakeClock, **overrides: Any) -> AbstractContextManager[Head]:
        if db_url is not None:
            overrides.setdefault("db_url", db_url)
        elif "db_url" not in overrides and not (home / "corral.db").exists():
            home.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(request.getfixturevalue("sqlite_template"), home / "corral.db")
        return open_head(home, clock, **overrides)

    return start


@pytest.fixture
def head(tmp_path: Path, clock: FakeClock, start_head: Callable[..., AbstractContextManager[Head]]) -> Iterator[Head]:
    with start_head(tmp_path / "home", clock) as started:
        yield started
