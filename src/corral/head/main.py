"""`corral head`: run the control plane in the foreground."""

from __future__ import annotations

import gc
import logging
import signal
import socket

import uvicorn

from corral.head.app import create_app
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
    app = create_app(settings)
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
        lifespan="on",
        log_config=None,
        ssl_certfile=str(settings.ssl_certfile) if settings.ssl_certfile else None,
        ssl_keyfile=str(settings.ssl_keyfile) if settings.ssl_keyfile else None,
    )
    server = uvicorn.Server(config)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    quieten_garbage_collection()
    logging.getLogger(__name__).info("listening on %s", settings.url)
    server.run(sockets=[sock])
