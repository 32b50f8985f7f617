"""The gateway against a real replica process: retry on a refused connection, the replica header,
streaming, and the 503 after the hold; on uvicorn (ASGI, as the head serves it) and on aiohttp's
server (as `corral gateway` serves it)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from corral.api.services import Endpoint, GatewayView, ServiceEndpoints
from corral.serve.proxy.aioserver import serve
from corral.serve.proxy.gateway import Gateway
from corral.serve.proxy.load import LoadBook
from corral.serve.proxy.pool import ReplicaPool
from corral.testing.net import free_port

T = TypeVar("T")
MODEL_SERVER = Path(__file__).resolve().parents[2] / "examples" / "model_server.py"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run on an event loop of its own thread, whatever loop the test process may already run."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(scope="module")
def replica():
    port = free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1", "CORRAL_JOB_ID": "live", "STREAM_GAP_S": "0.2"}
    proc = subprocess.Popen([sys.executable, str(MODEL_SERVER)], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            assert time.monotonic() < deadline, "the model server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def gateway(
    endpoints: dict[str, list[Endpoint]], book: LoadBook | None = None, hold_s: float = 5.0, stopped: bool = False
) -> Gateway:
    view = GatewayView(
        services=[ServiceEndpoints(service=s, ready=e, hold_s=hold_s, stopped=stopped) for s, e in endpoints.items()]
    )

    async def source() -> GatewayView:
        return view

    return Gateway(ReplicaPool(source, interval_s=0.05), book or LoadBook())


async def through(gw: Gateway, *requests: tuple[str, str]) -> list[httpx.Response]:
    await gw.start()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(gw), base_url="http://gw") as client:
            return [await client.request(method, path, json={"x": [0.1] * 16}) for method, path in requests]
    finally:
        await gw.close()


def test_a_refused_connection_is_retried_once_on_another_replica(replica):
    dead = Endpoint(replica="dead", url=f"http://127.0.0.1:{free_port()}")
    gw = gateway({"m": [dead, Endpoint(replica="live", url=replica)]})
    responses = run(through(gw, *[("POST", "/s/m/predict")] * 20))
    assert [r.status_code for r in responses] == [200] * 20
    assert {r.headers["x-corral-replica"] for r in responses} == {"live"}


def test_only_dead_replicas_give_502_naming_the_replica():
    dead = Endpoint(replica="dead", url=f"http://127.0.0.1:{free_port()}")
    (response,) = run(through(gateway({"m": [dead]}), ("POST", "/s/m/predict")))  # held, then tried once more
    assert response.status_code == 502 and "dead" in response.json()["detail"]
    assert response.headers["x-corral-replica"] == "dead"


def changed_while_held(first: list[ServiceEndpoints], then: list[ServiceEndpoints], method: str, after_s: float) -> Any:
    """A request sent to a gateway whose view is ``first``, and the view ``then`` once ``after_s`` have passed
    with the request still unanswered; answers the response."""
    views = [GatewayView(services=first)]

    async def source() -> GatewayView:
        return views[-1]

    async def scenario() -> httpx.Response:
        gw = Gateway(ReplicaPool(source, interval_s=0.05), LoadBook())
        await gw.start()
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(gw), base_url="http://gw") as client:
                held = asyncio.ensure_future(client.request(method, "/s/m/predict", json={"x": [0.1] * 16}))
                await asyncio.sleep(after_s)
                assert not held.done()
                views.append(GatewayView(services=then))
                return await held
        finally:
            await gw.close()

    return run(scenario())


def test_a_lone_replica_that_refuses_is_waited_for_and_its_replacement_serves(replica):
    dead = Endpoint(replica="r1", url=f"http://127.0.0.1:{free_port()}")
    live = Endpoint(replica="r2", url=replica)  # the replica died: restarted in place, on another port
    response = changed_while_held(
        [ServiceEndpoints(service="m", ready=[dead], hold_s=10, stopped=False)],
        [ServiceEndpoints(service="m", ready=[live], hold_s=10, stopped=False)],
        "POST",
        0.3,
    )
    assert response.status_code == 200 and response.headers["x-corral-replica"] == "r2"


def test_no_ready_replica_is_held_then_answered_503():
    book = LoadBook()
    started = time.monotonic()
    (response,) = run(through(gateway({"m": []}, book, hold_s=0.5), ("GET", "/s/m/")))
    assert response.status_code == 503
    assert "no ready replica" in response.json()["detail"]
    assert time.monotonic() - started >= 0.5
    assert book.local_report()["m"].requests == 1 and book.local_report()["m"].waiting == 0


def test_the_503_after_the_hold_says_how_long_the_request_waited():
    (response,) = run(through(gateway({"m": []}, hold_s=1.0), ("GET", "/s/m/")))
    assert response.status_code == 503 and "after waiting 1s" in response.json()["detail"]


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [("delete", 404, "was deleted while the request waited"), ("scale to 0", 503, "scaled to 0")],
)
def test_a_request_held_for_a_replica_is_answered_once_its_service_is_deleted_or_stopped(change, status, words):
    stopped = [ServiceEndpoints(service="m", ready=[], hold_s=30, stopped=True)]
    started = time.monotonic()
    response = changed_while_held(
        [ServiceEndpoints(service="m", ready=[], hold_s=30, stopped=False)],
        [] if change == "delete" else stopped,
        "GET",
        0.5,
    )
    assert response.status_code == status and words in response.json()["detail"]
    assert time.monotonic() - started < 5  # not the 30 s hold


def test_a_service_stopped_by_hand_is_refused_at_once():
    started = time.monotonic()
    (response,) = run(through(gateway({"m": []}, hold_s=30, stopped=True), ("GET", "/s/m/")))
    assert response.status_code == 503 and "scaled to 0" in response.json()["detail"]
    assert time.monotonic() - started < 5


def test_unknown_service_is_404(replica):
    (response,) = run(through(gateway({"m": [Endpoint(replica="live", url=replica)]}), ("GET", "/s/other/")))
    assert response.status_code == 404 and "other" in response.json()["detail"]


def test_a_service_created_just_after_a_refresh_is_found_on_its_first_request(replica):
    """The pool refreshed a moment ago without the service; the request must not be answered 404."""
    views = [GatewayView(services=[])]
    fetches = []

    async def source() -> GatewayView:
        fetches.append(time.monotonic())
        return views[-1]

    async def scenario() -> list[httpx.Response]:
        gw = Gateway(ReplicaPool(source, interval_s=60), LoadBook())
        await gw.start()
        try:
            while not gw.pool.loaded:
                await asyncio.sleep(0.01)
            views.append(
                GatewayView(
                    services=[
                        ServiceEndpoints(
                            service="new", ready=[Endpoint(replica="live", url=replica)], hold_s=5, stopped=False
                        )
                    ]
                )
            )
            async with httpx.AsyncClient(transport=httpx.ASGITransport(gw), base_url="http://gw") as client:
                requests = [client.post("/s/new/predict", json={"x": [0.1] * 16}) for _ in range(5)]
                return list(await asyncio.gather(*requests))
        finally:
            await gw.close()

    responses = run(scenario())
    assert [r.status_code for r in responses] == [200] * 5
    assert len(fetches) == 2  # the five requests that arrived together shared one fetch


def test_the_aiohttp_server_passes_whole_and_streamed_responses(replica):
    port = free_port()

    async def scenario() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", port))
        server = asyncio.create_task(serve(gateway({"m": [Endpoint(replica="live", url=replica)]}), sock))
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                for _ in range(100):
                    with contextlib.suppress(httpx.ConnectError):
                        whole = await client.post("/s/m/predict?verbose=1", json={"x": [0.1] * 16})
                        break
                    await asyncio.sleep(0.05)
                assert whole.status_code == 200 and whole.headers["x-corral-replica"] == "live"
                assert whole.json()["replica"] == "live"
                arrivals = []
                async with client.stream("GET", "/s/m/stream?tokens=4") as streamed:
                    assert streamed.headers["content-type"] == "text/event-stream"
                    async for chunk in streamed.aiter_raw():
                        arrivals += [time.monotonic()] * chunk.count(b"\n\n")
                assert len(arrivals) == 4
                assert arrivals[-1] - arrivals[0] > 0.5  # three gaps of 0.2 s: passed on as they came
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server

    run(scenario())


def test_readiness_probes_pass_only_on_2xx_in_time(replica):
    from corral.serve.proxy.probe import Prober

    async def probe() -> dict[str, bool]:
        prober = Prober()
        try:
            targets = {
                "ok": replica + "/ready",
                "missing": replica + "/never",
                "dead": f"http://127.0.0.1:{free_port()}/",
            }
            return await prober.probe_all(targets, dict.fromkeys(targets, 1.0))
        finally:
            await prober.aclose()

    assert run(probe()) == {"ok": True, "missing": False, "dead": False}


def test_the_load_book_counts_the_requests_each_replica_holds(replica):
    port = free_port()

    async def scenario() -> tuple[dict[str, int], dict[str, int]]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", port))
        gw = gateway({"m": [Endpoint(replica="live", url=replica)]})
        server = asyncio.create_task(serve(gw, sock))
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                for _ in range(100):
                    with contextlib.suppress(httpx.ConnectError):
                        await client.get("/s/m/ready")
                        break
                    await asyncio.sleep(0.05)
                async with client.stream("GET", "/s/m/stream?tokens=3") as streamed:
                    chunks = streamed.aiter_raw()
                    await anext(chunks)
                    during = gw.book.replica_inflight(0.0)
                    _ = [chunk async for chunk in chunks]
                return during, gw.book.replica_inflight(0.0)
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server

    during, after = run(scenario())
    assert during == {"live": 1} and after == {}


def test_a_change_the_gateway_is_told_of_applies_to_the_next_request(replica):
    live = ServiceEndpoints(service="m", ready=[Endpoint(replica="live", url=replica)], hold_s=5, stopped=False)
    views = [GatewayView(services=[live])]

    async def source() -> GatewayView:
        return views[-1]

    async def scenario() -> list[int]:
        gw = Gateway(ReplicaPool(source, interval_s=60), LoadBook())
        await gw.start()
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(gw), base_url="http://gw") as client:
                before = await client.post("/s/m/predict", json={"x": [0.1] * 16})
                views.append(GatewayView(services=[live.model_copy(update={"ready": [], "stopped": True})]))
                gw.pool.invalidate()  # as the head does when `corral service scale m 0` commits
                after = await client.post("/s/m/predict", json={"x": [0.1] * 16})
                views.append(GatewayView(services=[]))
                gw.pool.invalidate()  # `corral service delete m`
                deleted = await client.post("/s/m/predict", json={"x": [0.1] * 16})
            return [before.status_code, after.status_code, deleted.status_code]
        finally:
            await gw.close()

    assert run(scenario()) == [200, 503, 404]


def test_a_replica_cannot_name_itself_in_the_replica_header():
    import http.server
    import threading

    class Spoofing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("X-Corral-Replica", "spoofed")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Spoofing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        (response,) = run(through(gateway({"m": [Endpoint(replica="real", url=url)]}), ("GET", "/s/m/x")))
    finally:
        server.shutdown()
        server.server_close()
    assert response.status_code == 200
    assert response.headers.get_list("x-corral-replica") == ["real"]
