"""The gateway on the wire: real HTTP on 127.0.0.1 between a client, the gateway (on uvicorn as the
head serves it, and on aiohttp's server as `corral gateway` serves it) and tiny replicas that
see each request's bytes and answer as each test needs: cut off, wrong, or well."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from gatewire import FRONTS, Handler, Seen, TinyReplica, answer, echo_target, fronted, gateway, raw_request, run


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "POST"])
def test_a_request_that_reached_a_replica_stopped_mid_request_is_not_sent_again(front, method):
    async def answer_once_then_stop(replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
        if len(replica.seen) == 1:  # the first request leaves a kept-alive connection behind
            writer.write(answer(b"first"))
            return True
        replica.stop_listening()  # stopped mid-request: no answer, and no new connections
        return False

    async def scenario() -> tuple[list[int], TinyReplica, TinyReplica, httpx.Response]:
        stopping, other = TinyReplica(answer_once_then_stop), TinyReplica(echo_target)
        gw = gateway(("stopping", await stopping.start()), ("other", await other.start()))
        gw.pool.outstanding["other"] = 1000  # the balancer picks "stopping" while it is in the pool
        async with fronted(front, gw, stopping, other) as url, httpx.AsyncClient(base_url=url) as client:
            first = await client.request(method, "/s/m/first", content=b"x" if method in ("PUT", "POST") else None)
            second = await client.request(method, "/s/m/second", content=b"y" if method in ("PUT", "POST") else None)
        return [first.status_code], stopping, other, second

    statuses, stopping, other, second = run(scenario())
    assert statuses == [200]
    assert [s.target for s in stopping.seen] == [b"/first", b"/second"]
    assert other.seen == []  # the replica had it: it is not sent anywhere else
    assert second.status_code == 502 and second.headers["x-corral-replica"] == "stopping"


EXACT = [
    b"/s/m/a%23b",
    b"/s/m/a%3Fb=c",
    b"/s/m/a%2Fb",
    b"/s/m/a%2541",
    b"/s/m//double//slash",
    b"/s/m/x/../y/./z",
    b"/s/m/sign?x=%2F&y=%3F&z=%41&w=a+b&v=%zz&&u",
    b"/s/m/?",
    b"/s/m",
]


@pytest.mark.parametrize("front", FRONTS)
def test_paths_and_query_strings_reach_the_replica_byte_for_byte(front):
    async def scenario() -> tuple[list[tuple[int, bytes]], TinyReplica]:
        replica = TinyReplica(echo_target)
        gw = gateway(("r", await replica.start()))
        out = []
        async with fronted(front, gw, replica) as url:
            for path in EXACT:
                status, _, body = await raw_request(url, b"GET %s HTTP/1.1\r\nHost: gw\r\n\r\n" % path)
                out.append((status, body))
        return out, replica

    answers, replica = run(scenario())
    assert [status for status, _ in answers] == [200] * len(EXACT)
    expected = [b"/a%23b", b"/a%3Fb=c", b"/a%2Fb", b"/a%2541", b"//double//slash", b"/x/../y/./z"]
    expected += [b"/sign?x=%2F&y=%3F&z=%41&w=a+b&v=%zz&&u", b"/", b"/"]
    assert [s.target for s in replica.seen] == expected


@pytest.mark.parametrize("front", FRONTS)
def test_request_bodies_of_many_megabytes_pass_on_both_servers(front):
    big = bytes(range(256)) * (24 * 4096)  # 24 MiB

    async def length(_replica: TinyReplica, seen: Seen, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b"%d" % len(seen.body)))
        return True

    async def scenario() -> tuple[httpx.Response, TinyReplica]:
        replica = TinyReplica(length)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            return await client.post("/s/m/upload", content=big), replica

    response, replica = run(scenario())
    assert response.status_code == 200 and response.text == str(len(big))
    assert replica.seen[0].body == big


def cut_after(head: bytes, sent: bytes) -> Handler:
    async def handler(_replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
        writer.write(head + sent)
        await writer.drain()
        await asyncio.sleep(0.1)  # the gateway has passed on what it got: now the replica dies
        return False

    return handler


CUTS = {
    "small-fixed": (b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", b"x" * 5000),
    "large-fixed": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", b"x" * 5000),
    "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"5\r\nhello\r\n5\r\nworld\r\n"),
}


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("cut", CUTS)
def test_a_replica_dying_mid_response_is_never_a_complete_answer_nor_a_traceback(front, cut, caplog):
    caplog.set_level(logging.WARNING)

    async def scenario() -> tuple[int, str | None, bool]:
        replica = TinyReplica(cut_after(*CUTS[cut]))
        gw = gateway(("dying", await replica.start()))
        async with fronted(front, gw, replica) as url, httpx.AsyncClient(base_url=url) as client:
            async with client.stream("GET", "/s/m/big") as response:
                try:
                    await response.aread()
                    whole = True
                except httpx.RemoteProtocolError:
                    whole = False
            return response.status_code, response.headers.get("x-corral-replica"), whole

    status, named, whole = run(scenario())
    assert named == "dying"
    if cut == "small-fixed":  # nothing had gone to the client yet: an honest 502
        assert status == 502 and whole
    else:  # the status line had gone: the client's connection is cut, never a false end
        assert status == 200 and not whole
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    assert any("dying" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


@pytest.mark.parametrize("front", FRONTS)
def test_the_replicas_date_and_server_headers_pass_once(front):
    dated = (b"Date: Mon, 01 Jan 2024 00:00:00 GMT", b"Server: tiny/1")

    async def with_headers(_replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b"ok", *dated))
        return True

    async def scenario() -> list[tuple[bytes, bytes]]:
        replica = TinyReplica(with_headers)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url:
            _, headers, _ = await raw_request(url, b"GET /s/m/ HTTP/1.1\r\nHost: gw\r\n\r\n")
        return headers

    headers = run(scenario())
    assert [v for k, v in headers if k == b"date"] == [b"Mon, 01 Jan 2024 00:00:00 GMT"]
    assert [v for k, v in headers if k == b"server"] == [b"tiny/1"]
