"""A real head served by uvicorn on a free 127.0.0.1 port, in a background thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI

from corral.head.app import create_app
from corral.head.runtime import HeadRuntime
from corral.head.security import Role, hash_token
from corral.head.settings import HeadSettings
from corral.head.store.db import sqlite_url
from corral.head.store.tables import TokenRow
from corral.testing import FakeClock
from corral.testing.net import free_port


@dataclass
class LiveHead:
    url: str
    app: FastAPI
    admin_token: str
    home: Path

    @property
    def rt(self) -> HeadRuntime:
        rt: HeadRuntime = self.app.state.runtime
        return rt

    def add_token(self, user: str, role: Role = Role.USER) -> str:
        token = f"cu_test_{user}_{role.value}"
        with self.rt.write() as session:
            if session.get(TokenRow, hash_token(token)) is None:
                session.add(
                    TokenRow(
                        hash=hash_token(token), user=user, role=role.value, name=user, created_at=self.rt.clock.now()
                    )
                )
        return token


@pytest.fixture(scope="module")
def live_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveHead]:
    home = tmp_path_factory.mktemp("head")
    port = free_port()
    settings = HeadSettings(
        home=home, db_url=sqlite_url(home / "corral.db"), host="127.0.0.1", port=port, write_client_config=True
    )
    app = create_app(settings, clock=FakeClock(), run_loops=False)
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
        yield LiveHead(url=settings.url, app=app, admin_token=app.state.admin_token, home=home)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def closed_port_url() -> str:
    """A URL on which nothing listens."""
    return f"http://127.0.0.1:{free_port()}"
