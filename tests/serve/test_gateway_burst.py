"""Bursts: a gateway opens at most REPLICA_CONNECTIONS connections to one replica (more requests wait
for one of them), `corral gateway` queues a burst of new clients without dropping any, and a
request on a connection the replica's system never accepted goes to another replica after
ACCEPT_S instead of waiting out the 300 s read bound."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gatewire import FRONTS, LOOP_OF, Seen, TinyReplica, answer, echo_target, fronted, gateway, raw_request, run

from corral.serve.proxy.accept import ACCEPT_S, acked_bytes
from corral.serve.proxy.gateway import REPLICA_CONNECTIONS
from corral.testing import netns
from corral.testing.net import free_port

SLOW_S = 0.5


async def slow(_replica: TinyReplica, _seen: Seen, writer: asyncio.StreamWriter) -> bool:
    await asyncio.sleep(SLOW_S)
    writer.write(answer(b"ok"))
    return True


@pytest.mark.parametrize("front", FRONTS)
def test_a_burst_to_one_replica_opens_at_most_the_connection_limit(front):
    burst = REPLICA_CONNECTIONS + 50

    async def scenario() -> tuple[list[int], TinyReplica]:
        replica = TinyReplica(slow)
        gw = gateway(("r", await replica.start(backlog=1000)))
        async with fronted(front, gw, replica) as url:
            request = b"GET /s/m/ HTTP/1.1\r\nHost: gw\r\n\r\n"
            answers = [raw_request(url, request) for _ in range(burst)]
            statuses = [status for status, _, _ in await asyncio.wait_for(asyncio.gather(*answers), 30)]
        return statuses, replica

    statuses, replica = run(scenario())
    assert statuses == [200] * burst
    assert replica.most_open <= REPLICA_CONNECTIONS  # the rest waited at the gateway, then reused them


def test_a_burst_of_new_clients_fits_in_the_standalone_gateways_listen_queue():
    somaxconn = Path("/proc/sys/net/core/somaxconn")
    if not somaxconn.exists():
        pytest.skip("the system's listen queue limit is read from /proc (Linux)")
    burst = min(300, int(somaxconn.read_text()) - 1)

    def knock(port: int) -> int:
        """Open ``burst`` connections while the gateway's event loop is busy (nothing is accepted),
        send a byte on each: how many the system queued for it (it acknowledged their byte)."""
        clients = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(burst)]
        try:
            for client in clients:
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
            time.sleep(0.3)
            for client in clients:
                with contextlib.suppress(OSError):  # one whose handshake was dropped is not connected
                    client.send(b"G")
            time.sleep(0.3)
            return sum(1 for client in clients if acked_bytes(client))
        finally:
            for client in clients:
                client.close()

    async def scenario() -> int:
        replica = TinyReplica(echo_target)
        async with fronted("aiohttp", gateway(("r", await replica.start())), replica) as url:
            return knock(int(url.rsplit(":", 1)[1]))  # blocks the event loop on purpose

    assert run(scenario()) == burst


LISTEN_AND_NEVER_ACCEPT = """
import socket, sys, time
server = socket.socket()
server.bind(("0.0.0.0", int(sys.argv[1])))
server.listen(100)
print("listening", flush=True)
time.sleep(60)
"""


@pytest.fixture(scope="module")  # one namespace: a second one made at once could not reuse the first one's names
def unaccepting_replica() -> Iterator[str]:
    """A replica in a network namespace whose system completes handshakes but takes in nothing after
    them (its firewall drops every packet but a SYN), as when a burst overflowed its listen queue."""
    reason = netns.unavailable_reason() or (None if shutil.which("iptables") else "iptables is missing")
    if reason is not None:
        pytest.skip(f"a network namespace with a firewall is needed: {reason}")
    network = netns.Network.create()
    listener: subprocess.Popen[str] | None = None
    try:
        address, port = network.add_host("frozen"), free_port()
        drop = ["iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(port), "!", "--syn", "-j", "DROP"]
        subprocess.run([*network.run_in("frozen"), *drop], check=True, capture_output=True, timeout=10)
        command = [*network.run_in("frozen"), sys.executable, "-c", LISTEN_AND_NEVER_ACCEPT, str(port)]
        listener = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
        yield f"http://{address}:{port}"
    finally:
        if listener is not None:
            listener.kill()
            listener.wait(10)
            if listener.stdout is not None:
                listener.stdout.close()
        network.close()


@pytest.mark.parametrize("front", FRONTS)
def test_a_connection_the_replica_never_accepted_is_given_up_and_the_request_sent_elsewhere(front, unaccepting_replica):
    async def scenario() -> tuple[int, dict[bytes, bytes], float, TinyReplica]:
        healthy = TinyReplica(echo_target)
        gw = gateway(("frozen", unaccepting_replica), ("healthy", await healthy.start()))
        gw.pool.outstanding["healthy"] = 1000  # the balancer tries "frozen" first
        async with fronted(front, gw, healthy) as url:
            started = time.monotonic()
            request = b"POST /s/m/once HTTP/1.1\r\nHost: gw\r\nContent-Length: 1\r\n\r\nx"
            status, headers, _ = await asyncio.wait_for(raw_request(url, request), 20)
            return status, dict(headers), time.monotonic() - started, healthy

    status, headers, took, healthy = run(scenario(), LOOP_OF[front])
    assert status == 200 and headers[b"x-corral-replica"] == b"healthy"
    assert [s.target for s in healthy.seen] == [b"/once"]
    assert ACCEPT_S - 0.5 < took < ACCEPT_S + 3
