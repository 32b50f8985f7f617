"""`corral head`: run the control plane in the foreground."""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
from pathlib import Path

import uvicorn

from corral import pidlock
from corral.head.app import create_app
from corral.head.runtime import HeadRuntime
from corral.head.settings import HeadSettings
from corral.obs.logging import setup_logging

GC_YOUNG_THRESHOLD = 20_000
"""Allocations between young collections (Python's default is 700); see ``quieten_garbage_collection``."""


def quieten_garbage_collection() -> None:
    """Keep the collector's pauses short: a full collection stops every thread, heartbeats included.

    What exists once the head has started (modules, the API's schemas, the ORM's mappings) lives as
    long as the process, so it is moved out of the collector's sight; and young collections run
    less often, so fewer objects reach the old generation, whose collections walk them all."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def run(settings: HeadSettings) -> None:
    setup_logging("head")
    lock = _lock_home(settings.home)  # held while this process lives
    app = create_app(settings)
    _migrate_or_exit(app.state.runtime)
    # Bind first so that a port in use fails with a clear message before anything else starts.
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only disables Nagle on accepted sockets whose protocol says TCP,
    # and without it every keep-alive response waits out the peer's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"corral head: cannot listen on {settings.host}:{settings.port}: {exc.strerror}") from None
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        # The gateway passes on a replica's own Date and Server headers; uvicorn's would double them.
        server_header=False,
        date_header=False,
        lifespan="on",
        log_config=None,
        ssl_certfile=str(settings.ssl_certfile) if settings.ssl_certfile else None,
        ssl_keyfile=str(settings.ssl_keyfile) if settings.ssl_keyfile else None,
    )
    server = _Server(config, app.state.runtime)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    quieten_garbage_collection()
    logging.getLogger(__name__).info("listening on %s", settings.url)
    server.run(sockets=[sock])
    os.close(lock)


def _migrate_or_exit(rt: HeadRuntime) -> None:
    """Bring the schema up to date before serving (the app does it again, a no-op then): a database the
    head may not write gives one line naming the cause, not a traceback after "listening"."""
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    try:
        rt.db.migrate()
    except SQLAlchemyError as exc:
        cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        raise SystemExit(
            f"corral head: cannot create or update its tables in the --db database ({first}): it must be a"
            " database in which the head's user may create tables"
        ) from None


def _lock_home(home: Path) -> int:
    """Refuse to start beside another head of the same CORRAL_HOME: both would write its client config,
    and (being the same holder) take the leader lease from each other at every renewal."""
    home.mkdir(parents=True, exist_ok=True)
    try:
        return pidlock.hold(home / "head.lock")
    except pidlock.Held as held:
        raise SystemExit(
            f"corral head: another head (pid {held.holder}) already runs with CORRAL_HOME {home}; stop it first,"
            " or give this one its own CORRAL_HOME (several heads share a PostgreSQL database, not a home)"
        ) from None


class _Server(uvicorn.Server):
    """Tells the head when shutdown begins, so that long polls and followed log streams end cleanly
    instead of being cancelled mid-response once the graceful shutdown times out."""

    def __init__(self, config: uvicorn.Config, rt: HeadRuntime) -> None:
        super().__init__(config)
        self._rt = rt

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._rt.stopping = True  # the leader loop resigns the lease within a second, not after the requests
        if self._rt.notifier is not None:
            self._rt.notifier.wake_all()
        await super().shutdown(sockets)
