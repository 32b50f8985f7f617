"""What the replica's answer looks like through the gateway, on both servers: its Content-Length
(a long body streamed as it came, a HEAD answer's length kept), no Content-Type it did not send;
and what the replica sees of the client: the conventional X-Forwarded-* headers."""

from __future__ import annotations

import asyncio

import pytest
from gatewire import FRONTS, Seen, TinyReplica, answer, fronted, gateway, raw_request, run

LONG = bytes(range(256)) * 4096  # 1 MiB: beyond what the gateway reads whole before answering


async def by_target(_replica: TinyReplica, seen: Seen, writer: asyncio.StreamWriter) -> bool:
    """``/long``: LONG with its length; ``/length/N``: an N-byte answer (its head alone for HEAD);
    ``/chunked``: a short chunked answer; anything else: ``ok``. None has a Content-Type."""
    if seen.target == b"/long":
        writer.write(answer(LONG))
    elif seen.target.startswith(b"/length/"):
        length = int(seen.target.rsplit(b"/", 1)[1])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
        if seen.method != b"HEAD":
            writer.write(b"x" * length)
    elif seen.target == b"/chunked":
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    else:
        writer.write(answer(b"ok"))
    return True


def get(path: bytes, *extra: bytes, method: bytes = b"GET", host: bytes = b"gw") -> bytes:
    return b"\r\n".join([b"%s /s/m%s HTTP/1.1" % (method, path), b"Host: " + host, *extra]) + b"\r\n\r\n"


Answer = tuple[int, dict[bytes, bytes], bytes]


def exchanges(front: str, *requests: tuple[bytes, bool]) -> tuple[list[Answer], TinyReplica]:
    """Each raw request (and whether its answer has a body) through the gateway on ``front``."""

    async def scenario() -> tuple[list[Answer], TinyReplica]:
        replica = TinyReplica(by_target)
        gw = gateway(("r", await replica.start()))
        out = []
        async with fronted(front, gw, replica) as url:
            for request, with_body in requests:
                status, headers, body = await raw_request(url, request, with_body=with_body)
                out.append((status, dict(headers), body))
        return out, replica

    return run(scenario())


@pytest.mark.parametrize("front", FRONTS)
def test_a_long_answer_keeps_its_length_and_passes_unchanged(front):
    ((status, headers, body),), _ = exchanges(front, (get(b"/long"), True))
    assert status == 200
    assert headers.get(b"content-length") == b"%d" % len(LONG)
    assert b"transfer-encoding" not in headers
    assert body == LONG


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("length", [1234, 1234567])
def test_a_head_answer_keeps_the_replicas_content_length(front, length):
    request = get(b"/length/%d" % length, method=b"HEAD")
    ((status, headers, body),), _ = exchanges(front, (request, False))
    assert status == 200 and body == b""
    assert headers.get(b"content-length") == b"%d" % length
    assert b"transfer-encoding" not in headers


@pytest.mark.parametrize("front", FRONTS)
def test_no_content_type_is_added_where_the_replica_sent_none(front):
    answers, _ = exchanges(front, (get(b"/"), True), (get(b"/long"), True), (get(b"/chunked"), False))
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert [b"content-type" in headers for _, headers, _ in answers] == [False, False, False]


@pytest.mark.parametrize("front", FRONTS)
def test_the_replica_learns_the_client_address_host_and_scheme(front):
    _, replica = exchanges(front, (get(b"/", host=b"api.example:8080"), True))
    (seen,) = replica.seen
    assert seen.headers[b"x-forwarded-for"] == b"127.0.0.1"
    assert seen.headers[b"x-forwarded-host"] == b"api.example:8080"
    assert seen.headers[b"x-forwarded-proto"] == b"http"


@pytest.mark.parametrize("front", FRONTS)
def test_the_client_address_is_appended_to_an_earlier_proxys_headers(front):
    # From 127.0.0.2: uvicorn (as the head runs it) takes X-Forwarded-* only from 127.0.0.1 and ::1.
    chain = b"X-Forwarded-For: 203.0.113.7, 198.51.100.2"
    proxied = get(b"/", chain, b"X-Forwarded-Host: api.example", b"X-Forwarded-Proto: https")

    async def scenario() -> TinyReplica:
        replica = TinyReplica(by_target)
        gw = gateway(("r", await replica.start()))
        async with fronted(front, gw, replica) as url:
            assert (await raw_request(url, proxied, source="127.0.0.2"))[0] == 200
        return replica

    (seen,) = run(scenario()).seen
    assert seen.headers[b"x-forwarded-for"] == b"203.0.113.7, 198.51.100.2, 127.0.0.2"
    assert seen.headers[b"x-forwarded-host"] == b"api.example"
    assert seen.headers[b"x-forwarded-proto"] == b"https"
