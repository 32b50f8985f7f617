"""Which HTTP client the gateway should use to reach replicas: httpx or aiohttp, under concurrency.

Starts examples/model_server.py on a free port and sends it N predictions through each client,
1 and 32 at a time, over keep-alive connections (not part of `make test`).

    .venv/bin/python bench/proxy_clients.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
from benchlib import free_port

MODEL_SERVER = Path(__file__).resolve().parents[1] / "examples" / "model_server.py"
BODY = json.dumps({"x": [0.5] * 16}).encode()


async def with_httpx(url: str, n: int, concurrency: int) -> float:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                response = await client.send(client.build_request("POST", url, content=BODY), stream=True)
                async for _ in response.aiter_raw():
                    pass
                await response.aclose()

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - started)


async def with_aiohttp(url: str, n: int, concurrency: int) -> float:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000)) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate, session.post(url, data=BODY) as response:
                async for _ in response.content.iter_any():
                    pass

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1"}
    server = subprocess.Popen([sys.executable, str(MODEL_SERVER)], env=env)
    try:
        time.sleep(2.0)
        url = f"http://127.0.0.1:{port}/predict"
        for concurrency in (1, 32):
            for name, run in (("httpx", with_httpx), ("aiohttp", with_aiohttp)):
                rate = asyncio.run(run(url, args.requests, concurrency))
                print(f"{name:8} {concurrency:3} at a time: {rate:7.0f} requests/s")
    finally:
        server.terminate()
        server.wait(10)
    with open("/proc/loadavg") as handle:
        print("load average:", " ".join(handle.read().split()[:3]))


if __name__ == "__main__":
    main()
