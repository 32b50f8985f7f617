"""A client that hangs up stops its request at once, on both servers: the request to the replica is
closed, and the counters the autoscaler and the drain read drop, whether the request waited for the
replica's answer, was streaming it, or was held for a replica; nothing is logged as a failure."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import pytest
from gatewire import FRONTS, LOOP_OF, Seen, TinyReplica, fronted, gateway, run

from corral.serve.proxy.gateway import Gateway

GIVE_UP_S = 10.0  # every replica here answers or stops by then, so no test can hang


async def silent(_replica: TinyReplica, seen: Seen, _writer: asyncio.StreamWriter) -> bool:
    """Never answers; ends when the gateway closes the connection (or after ``GIVE_UP_S``)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(seen.reader.read(), GIVE_UP_S)
    return False


async def endless_stream(_replica: TinyReplica, seen: Seen, writer: asyncio.StreamWriter) -> bool:
    """A chunked answer, a piece every 50 ms, until the gateway closes the connection."""
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n")
    deadline = time.monotonic() + GIVE_UP_S
    while not seen.reader.at_eof() and time.monotonic() < deadline:
        writer.write(b"7\r\ndata: x\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
    return False


def in_flight(gw: Gateway) -> tuple[int, int, dict[str, int], int]:
    """The service's requests in flight and held, the requests each replica holds, and the balancer's count."""
    load = gw.book.local_report().get("m")
    service = (load.inflight, load.waiting) if load is not None else (0, 0)
    return *service, gw.book.replica_inflight(0.0), gw.pool.outstanding.get("r", 0)


async def until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def hang_up_when(url: str, request: bytes, ready: Callable[[], bool], read_first: bool = False) -> None:
    """Send ``request``, wait until ``ready()`` (and for the first bytes of the answer if ``read_first``), hang up."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    if read_first:
        await asyncio.wait_for(reader.read(1), 5)
    assert await until(ready, 5), "the request never got as far as the test needs"
    writer.close()


GET = b"GET /s/m/slow HTTP/1.1\r\nHost: gw\r\n\r\n"


@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_hangs_up_before_the_answer_frees_the_replica_at_once(front):
    async def scenario() -> tuple[tuple[int, int, dict[str, int], int], bool, bool]:
        replica = TinyReplica(silent)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url:
            await hang_up_when(url, GET, lambda: bool(replica.seen))
            during = in_flight(gw)
            closed = await until(lambda: bool(replica.ended), 3)
            freed = await until(lambda: in_flight(gw) == (0, 0, {}, 0), 3)
            return during, closed, freed

    during, closed, freed = run(scenario(), LOOP_OF[front])
    assert during == (1, 0, {"r": 1}, 1)
    assert closed, "the gateway kept its request to the replica open after the client left"
    assert freed, "the client's request still counted as in flight"


@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_hangs_up_mid_stream_ends_the_stream_quietly(front, caplog):
    caplog.set_level(logging.DEBUG)

    async def scenario() -> tuple[bool, bool]:
        replica = TinyReplica(endless_stream)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url:
            await hang_up_when(url, GET, lambda: bool(replica.seen), read_first=True)
            closed = await until(lambda: bool(replica.ended), 3)
            freed = await until(lambda: in_flight(gw) == (0, 0, {}, 0), 3)
            return closed, freed

    closed, freed = run(scenario(), LOOP_OF[front])
    assert closed, "the gateway went on streaming from the replica after the client left"
    assert freed, "the client's request still counted as in flight"
    ours = [r for r in caplog.records if r.name.startswith("corral") or r.name.startswith("aiohttp")]
    assert not [r for r in ours if r.exc_info or r.levelno >= logging.WARNING], [r.getMessage() for r in ours]
    assert len(ours) <= 1, [r.getMessage() for r in ours]


@pytest.mark.parametrize("front", FRONTS)
def test_a_client_that_hangs_up_while_held_for_a_replica_is_no_longer_counted(front):
    async def scenario() -> tuple[tuple[int, int, dict[str, int], int], bool]:
        gw = gateway(hold_s=30)  # no ready replica: held up to 30 s
        async with fronted(front, gw) as url:
            await hang_up_when(url, GET, lambda: in_flight(gw)[1] == 1)
            during = in_flight(gw)
            return during, await until(lambda: in_flight(gw) == (0, 0, {}, 0), 3)

    during, freed = run(scenario(), LOOP_OF[front])
    assert during[:2] == (1, 1)
    assert freed, "a request whose client left was still held for a replica"
