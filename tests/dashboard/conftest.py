"""A real head served over HTTP (uvicorn in a thread, fake clock) and a real headless Chromium.

Chromium is Debian's (``apt-get install chromium``), driven by Playwright through
``executable_path``; no browser is ever downloaded. Where no Chromium is installed, the tests
are skipped with the reason. Screenshots go to ``test-artifacts/dashboard/`` (ignored by git).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from corral.head.app import create_app
from corral.head.runtime import HeadRuntime
from corral.head.services.scheduling import run_cycle
from corral.head.settings import HeadSettings
from corral.head.store.db import sqlite_url
from corral.sched import get_policy
from corral.testing import FakeClock
from corral.testing.net import free_port

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"


def find_chromium() -> str | None:
    for candidate in (os.environ.get("CORRAL_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module. Playwright's sync API marks an asyncio loop as running in this
    thread while it is active, so it must not outlive the module: later tests call asyncio.run."""
    executable = find_chromium()
    if executable is None:
        reason = "no Chromium found (apt-get install chromium, or set CORRAL_CHROMIUM): dashboard tests skipped"
        print(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"


def _screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def screenshot() -> Any:
    """``screenshot(page, name)`` saves a full-page PNG under test-artifacts/dashboard/."""
    return _screenshot


def sample(index: int, utilization: float, power: float = 300.0, ecc: int = 0) -> dict[str, Any]:
    return {
        "index": index,
        "utilization": utilization,
        "memory_used_mb": int(utilization * 400),
        "temperature_c": 40 + utilization / 3,
        "power_w": power,
        "ecc_uncorrectable": ecc,
    }


@dataclass
class Node:
    name: str
    token: str
    gpus: int
    applied: int = -1
    running: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ServedHead:
    """A head on a free port, driven through its HTTP API; scheduling cycles run when a test asks."""

    url: str
    rt: HeadRuntime
    clock: FakeClock
    admin: str
    http: httpx.Client
    nodes: dict[str, Node] = field(default_factory=dict)
    join: str = ""

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin}"}

    def link(self, token: str | None = None, refresh_s: float = 1.0) -> str:
        """The dashboard signed in with ``token`` (the admin's by default), as `corral dashboard` prints it."""
        return f"{self.url}/?refresh={refresh_s:g}#token={token or self.admin}"

    def register(self, name: str, gpus: int = 8, gpu_type: str = "H100") -> Node:
        if not self.join:
            self.join = self.http.get("/v1/join-token", headers=self.headers()).json()["token"]
        body = {
            "name": name,
            "gpus": [{"index": i, "type": gpu_type, "memory_mb": 80 * 1024} for i in range(gpus)],
            "cpus": 64,
            "memory_mb": 512 * 1024,
            "labels": {},
            "advertise_addr": "10.0.0.1",
            "gpu_source": "fake",
            "running": [],
        }
        response = self.http.post("/v1/agents/register", json=body, headers=self.headers(self.join))
        assert response.status_code == 200, response.text
        data = response.json()
        node = Node(name, data["node_token"], gpus, applied=data["desired"]["version"])
        self.nodes[name] = node
        return node

    def submit(self, spec: dict[str, Any], token: str | None = None) -> str:
        response = self.http.post("/v1/jobs", json=spec, headers=self.headers(token))
        assert response.status_code == 201, response.text
        job_id: str = response.json()["id"]
        return job_id

    def cycle(self) -> None:
        run_cycle(self.rt, get_policy("default"))

    def beat(self, node: Node, utilization: dict[int, float] | None = None, ecc: set[int] | None = None) -> None:
        """A heartbeat that starts every task the head wants on the node, with GPU readings."""
        desired = self.http.get(f"/v1/agents/{node.name}/desired", headers=self.headers(node.token)).json()
        for task in desired["tasks"]:
            node.running.setdefault(task["task_id"], task)
        busy = {g for t in node.running.values() for g in t["gpus"]}
        readings = utilization or {}
        samples = [
            sample(i, readings.get(i, 85.0 if i in busy else 0.0), ecc=1 if ecc and i in ecc else 0)
            for i in range(node.gpus)
        ]
        reports = [
            {"task_id": t["task_id"], "generation": t["generation"], "state": "RUNNING"} for t in node.running.values()
        ]
        body = {"tasks": reports, "applied_version": desired["version"], "samples": samples}
        response = self.http.post(f"/v1/agents/{node.name}/heartbeat", json=body, headers=self.headers(node.token))
        assert response.status_code == 200, response.text

    def ship_log(self, node: Node, job_id: str, text: str, offset: int = 0) -> None:
        response = self.http.put(
            f"/v1/agents/{node.name}/logs/{job_id}/0/0",
            params={"offset": offset},
            content=text.encode(),
            headers=self.headers(node.token),
        )
        assert response.status_code == 200, response.text

    def user_token(self, user: str) -> str:
        from corral.head.security import hash_token
        from corral.head.store.tables import TokenRow

        token = f"cu_test_{user}"
        with self.rt.write() as session:
            now = self.clock.now()
            session.add(TokenRow(hash=hash_token(token), user=user, role="user", name=user, created_at=now))
        return token


@pytest.fixture
def cluster_config() -> str | None:
    """The head's cluster config (YAML); a test module overrides this fixture to set teams and quotas."""
    return None


@pytest.fixture
def served(tmp_path: Path, cluster_config: str | None) -> Iterator[ServedHead]:
    # The fake clock starts in the recent past, so the browser's "now" (real time) lies after it.
    clock = FakeClock(start=datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3))
    port = free_port()
    config_path = None
    if cluster_config is not None:
        config_path = tmp_path / "corral.yaml"
        config_path.write_text(cluster_config)
    settings = HeadSettings(
        config_path=config_path,
        home=tmp_path / "home",
        db_url=sqlite_url(tmp_path / "home" / "corral.db"),
        port=port,
        gpu_prices={"H100": 2.5, "A100": 1.2},
        idle_after_s=600.0,
    )
    app = create_app(settings, clock=clock, run_loops=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the head did not start"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            yield ServedHead(url=url, rt=app.state.runtime, clock=clock, admin=app.state.admin_token, http=http)
    finally:
        server.should_exit = True
        thread.join(20)
