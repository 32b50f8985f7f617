"""Readiness probes: a replica is ready while GET its readiness path answers 2xx in time."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx


class Prober:
    """Probes replicas, over one long-lived client (making a client costs tens of milliseconds)."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    async def probe_all(self, targets: Mapping[str, str], timeout_s: Mapping[str, float]) -> dict[str, bool]:
        """Probe every ``replica → URL`` at once; answers whether each passed."""
        if not targets:
            return {}
        if self._client is None:
            self._client = httpx.AsyncClient(trust_env=False)
        client = self._client
        results = await asyncio.gather(*(_probe(client, url, timeout_s.get(key, 1.0)) for key, url in targets.items()))
        return dict(zip(targets, results, strict=True))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def _probe(client: httpx.AsyncClient, url: str, timeout_s: float) -> bool:
    try:
        response = await client.get(url, timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return 200 <= response.status_code < 300
