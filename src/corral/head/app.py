"""The head's FastAPI application and its lifespan (migrations, tokens, loops)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import DataError

from corral import __version__
from corral.clock import Clock, SystemClock
from corral.head import errors, leader
from corral.head.loops import heard_loop, idle_loop, liveness_loop, meter_loop, schedule_loop, serve_loop
from corral.head.metrics import HeadMetrics
from corral.head.notify import Notifier
from corral.head.routers import agents, cluster, config, dashboard, deps, jobs, rawbody, services, usage, users
from corral.head.routers.quietpath import QuietHeartbeats
from corral.head.runtime import HeadRuntime
from corral.head.services.accounting import record_head_prices
from corral.head.services.auth import TokenCache, bootstrap, write_client_config
from corral.head.settings import HeadSettings
from corral.head.store.db import Database
from corral.sched import get_policy
from corral.serve.proxy.load import LoadBook

log = logging.getLogger(__name__)


def create_app(settings: HeadSettings, clock: Clock | None = None, run_loops: bool = True) -> FastAPI:
    """Build the head. ``run_loops=False`` leaves scheduling to the caller (tests drive cycles)."""
    policy = get_policy(settings.policy)
    settings.home.mkdir(parents=True, exist_ok=True)
    db = Database(settings.db_url)
    rt = HeadRuntime(settings=settings, db=db, clock=clock or SystemClock())
    book = LoadBook()
    gateway = services.in_process_gateway(rt, book)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(db.migrate)
        admin, join = await asyncio.to_thread(bootstrap, rt)
        await asyncio.to_thread(record_head_prices, rt)
        if settings.write_client_config:
            write_client_config(settings.home, settings.url, admin, join)
        app.state.admin_token = admin
        rt.notifier = Notifier(asyncio.get_running_loop())
        tasks = []
        serve_wake = asyncio.Event()
        book.on_waiting = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, serve_wake.set)
        if run_loops:

            def start_loops() -> list[asyncio.Task[None]]:  # only while this head holds the leader lease
                loops = [asyncio.create_task(schedule_loop(rt, policy)), asyncio.create_task(liveness_loop(rt))]
                loops.append(asyncio.create_task(serve_loop(rt, book, serve_wake)))
                return [*loops, asyncio.create_task(meter_loop(rt)), asyncio.create_task(idle_loop(rt))]

            tasks = [asyncio.create_task(leader.lead_while_elected(rt, start_loops))]
            tasks.append(asyncio.create_task(heard_loop(rt)))
            if not db.is_sqlite:  # other heads may change what this head's agents wait for
                tasks.append(asyncio.create_task(leader.watch_desired_versions(rt)))
        await gateway.start()
        log.info("head ready at %s", settings.url)
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await gateway.close()
            db.close()

    app = FastAPI(
        title="Corral head",
        version=__version__,
        lifespan=lifespan,
        description="Control plane of a Corral GPU cluster: jobs, nodes, agents.",
    )
    app.state.runtime = rt
    metrics = HeadMetrics()
    metrics.watch(rt)
    app.state.tokens = TokenCache()
    errors.install(app)
    app.add_exception_handler(DataError, deps.database_refused_input)
    app.add_exception_handler(OverflowError, deps.database_refused_input)
    app.include_router(jobs.router)
    app.include_router(config.router)
    app.include_router(cluster.router)
    app.include_router(agents.router)
    app.include_router(usage.router)
    app.include_router(users.router)
    app.include_router(dashboard.router)
    app.state.serve_book = book
    app.include_router(services.router)
    app.include_router(services.gateway_router)
    app.add_middleware(services.GatewayFirst, gateway=gateway)
    app.add_middleware(QuietHeartbeats, rt=rt)
    rawbody.document_bodies(app)

    app.state.metrics = metrics
    app.add_api_route("/metrics", prometheus, tags=["cluster"], response_class=PlainTextResponse)
    # HEAD answers GET's headers (Content-Length included) and no body: starlette sends none for HEAD.
    app.add_api_route("/metrics", prometheus, methods=["HEAD"], include_in_schema=False)
    app.add_api_route("/healthz", healthz, tags=["cluster"])
    return app


# The two endpoints are module-level functions, not closures over one app: FastAPI caches what it
# learns of each endpoint callable in process-wide caches, which would keep every app built alive.
def prometheus(request: Request) -> PlainTextResponse:
    """Prometheus exposition: jobs, GPUs, nodes, queue wait, cycle time, per-GPU DCGM-style gauges."""
    metrics: HeadMetrics = request.app.state.metrics
    return PlainTextResponse(metrics.render(), media_type=CONTENT_TYPE_LATEST)


def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}
