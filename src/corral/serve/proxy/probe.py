"""Readiness probes: a replica is ready while GET its readiness path answers 2xx in time."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx


async def probe_all(targets: Mapping[str, str], timeout_s: Mapping[str, float]) -> dict[str, bool]:
    """Probe every ``replica → URL`` at once; answers whether each passed."""
    if not targets:
        return {}
    async with httpx.AsyncClient(trust_env=False) as client:
        results = await asyncio.gather(*(_probe(client, url, timeout_s.get(key, 1.0)) for key, url in targets.items()))
    return dict(zip(targets, results, strict=True))


async def _probe(client: httpx.AsyncClient, url: str, timeout_s: float) -> bool:
    try:
        response = await client.get(url, timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return 200 <= response.status_code < 300
