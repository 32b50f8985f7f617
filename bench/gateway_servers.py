"""Gateway CPU per request on different HTTP servers (not part of `make test`).

Runs the same gateway code (corral.serve.proxy.gateway, an ASGI app) in front of one
examples/model_server.py replica on each server named, sends 4,000 predictions 16 at a time, and
prints the gateway process's CPU time per request. Servers: ``uvicorn-h11`` (the head's server),
``uvicorn-httptools`` (needs the httptools package), ``aiohttp`` (what `corral gateway` runs).

    .venv/bin/python bench/gateway_servers.py [uvicorn-h11 uvicorn-httptools aiohttp]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway import Connection, cpu_seconds, free_port

MODEL_SERVER = Path(__file__).resolve().parents[1] / "examples" / "model_server.py"


def serve(server: str, port: int, replica_port: int) -> None:
    """Run the gateway on ``server`` until killed (the child process)."""
    from corral.api.services import Endpoint, GatewayView, ServiceEndpoints
    from corral.serve.proxy.gateway import Gateway
    from corral.serve.proxy.load import LoadBook
    from corral.serve.proxy.pool import ReplicaPool

    endpoint = Endpoint(replica="r1", url=f"http://127.0.0.1:{replica_port}")
    view = GatewayView(services=[ServiceEndpoints(service="b", ready=[endpoint], hold_s=5, stopped=False)])

    async def source() -> GatewayView:
        return view

    gateway = Gateway(ReplicaPool(source), LoadBook())
    if server.startswith("uvicorn-"):
        import uvicorn

        uvicorn.run(gateway, host="127.0.0.1", port=port, http=server.split("-", 1)[1], log_level="warning")
        return
    from corral.serve.proxy.aioserver import serve as aio_serve

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", port))
    asyncio.run(aio_serve(gateway, sock))


async def drive(url: str, total: int, concurrency: int = 16) -> float:
    conns = [Connection(url) for _ in range(concurrency)]
    await asyncio.gather(*(c.open() for c in conns))

    async def loop(conn: Connection) -> None:
        for _ in range(total // concurrency):
            await conn.post()

    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in conns))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return total / elapsed


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    servers = sys.argv[1:] or ["uvicorn-h11", "aiohttp"]
    replica_port = free_port()
    env = {**os.environ, "PORT": str(replica_port), "HOST": "127.0.0.1"}
    replica = subprocess.Popen([sys.executable, str(MODEL_SERVER)], env=env)
    try:
        wait_listening(replica_port)
        for server in servers:
            port = free_port()
            gateway = subprocess.Popen([sys.executable, __file__, "--serve", server, str(port), str(replica_port)])
            try:
                wait_listening(port)
                url = f"http://127.0.0.1:{port}/s/b/"
                asyncio.run(drive(url, 500))
                before = cpu_seconds(gateway.pid)
                rate = asyncio.run(drive(url, 4000))
                per_request = 1e6 * (cpu_seconds(gateway.pid) - before) / 4000
                with open("/proc/loadavg") as handle:
                    load = handle.read().split()[0]
                print(f"{server:18} {per_request:5.0f} µs CPU per request, {rate:6.0f} requests/s (load {load})")
            finally:
                gateway.terminate()
                gateway.wait(10)
    finally:
        replica.terminate()
        replica.wait(10)


if __name__ == "__main__":
    main()
