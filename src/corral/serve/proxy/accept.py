"""Connections a replica never accepted, told apart from requests it is still working on.

When a burst of new connections overflows a replica's listen queue, Linux (with SYN cookies, its
default) completes the handshake on the gateway's side while the replica keeps no trace of the
connection. The gateway then writes its request into a connection nobody reads, and TCP's
retransmissions (which back off, and arrive together for a whole burst) may not get it in for
minutes. Such a connection is recognisable: the replica's system has acknowledged no byte of the
request. A connection in that state ``ACCEPT_S`` after it was opened is closed and counts as one
that could not be made: the request provably never reached the replica, so it may go to another.
"""

from __future__ import annotations

import asyncio
import contextvars
import socket
import struct
from typing import Protocol

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ClientRequest
from aiohttp.tracing import Trace

ACCEPT_S = 3.0  # as long as the gateway waits for a connection to be made at all
_BYTES_ACKED = 120  # offset of tcpi_bytes_acked in Linux's struct tcp_info (since Linux 4.1)


class _Socket(Protocol):
    def getsockopt(self, level: int, option: int, buflen: int, /) -> bytes: ...


class Watch:
    """One attempt to send a request: whether the new connection it was given turned out not to be
    accepted. (A kept-alive connection was accepted: the replica has answered on it.)"""

    __slots__ = ("_timer", "unaccepted")

    def __init__(self) -> None:
        self.unaccepted = False
        self._timer: asyncio.TimerHandle | None = None

    def arm(self, transport: asyncio.Transport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._timer = asyncio.get_running_loop().call_later(ACCEPT_S, self._check, transport, sock)

    def disarm(self) -> None:
        """The replica answered, or the attempt ended otherwise: nothing left to check."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self, transport: asyncio.Transport, sock: _Socket) -> None:
        self._timer = None
        if not transport.is_closing() and acked_bytes(sock) == 0:
            self.unaccepted = True
            transport.abort()


WATCH: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("corral_gateway_watch", default=None)


class WatchingConnector(aiohttp.TCPConnector):
    """Arms the current request's ``Watch`` (set in ``WATCH``) on each connection it opens:
    ``_create_connection`` is where aiohttp opens one, so a request on a kept-alive connection
    costs nothing here."""

    async def _create_connection(
        self,
        req: ClientRequest,
        traces: list[Trace],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 (aiohttp's signature)
    ) -> ResponseHandler:
        protocol = await super()._create_connection(req, traces, timeout)
        watch = WATCH.get()
        if watch is not None and protocol.transport is not None:
            watch.arm(protocol.transport)
        return protocol


def acked_bytes(sock: _Socket) -> int | None:
    """Bytes of data the peer's system has acknowledged on ``sock``; None where the system does not say."""
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, _BYTES_ACKED + 8)
    except OSError:
        return None
    if len(info) < _BYTES_ACKED + 8:
        return None
    (acked,) = struct.unpack_from("Q", info, _BYTES_ACKED)
    return max(0, int(acked) - 1)  # the handshake's SYN counts as one byte
