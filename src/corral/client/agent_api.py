"""The agents' side of the head API (async httpx): register, heartbeat, long-poll, ship logs."""

from __future__ import annotations

from typing import Any

import httpx

from corral.api import DesiredState, HeartbeatRequest, RegisterRequest, RegisterResponse
from corral.client.calls import q
from corral.client.config import check_token, head_urls
from corral.client.errors import Unreachable, error_for


class AgentApi:
    """``head_url`` may list several heads (comma-separated): a call that cannot connect tries the next."""

    def __init__(self, head_url: str, join_token: str, timeout_s: float = 10.0) -> None:
        self._urls = head_urls(head_url) or [head_url.rstrip("/")]
        self.head_url = self._urls[0]
        self._join_token = check_token(join_token, "the join token")
        self._node_token = ""
        self._timeout = timeout_s
        self._http = httpx.AsyncClient(
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=8),
        )

    async def _send(self, method: str, path: str, token: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        failures = []
        for url in list(self._urls):
            try:
                response = await self._http.request(method, url + path, headers=headers, **kwargs)
            except httpx.TransportError as exc:
                failures.append(f"{url}: {exc!r}")
                continue
            if url != self._urls[0]:  # keep talking to the head that answered
                self._urls.remove(url)
                self._urls.insert(0, url)
                self.head_url = url
            if response.status_code >= 400:
                raise error_for(response.status_code, response.content)
            return response.json()
        raise Unreachable(f"cannot reach the head at {'; '.join(failures)}")

    async def register(self, req: RegisterRequest) -> RegisterResponse:
        data = await self._send("POST", "/v1/agents/register", self._join_token, json=req.model_dump(mode="json"))
        reply = RegisterResponse.model_validate(data)
        self._node_token = reply.node_token
        return reply

    async def heartbeat(self, node: str, req: HeartbeatRequest) -> DesiredState:
        data = await self._send(
            "POST", f"/v1/agents/{q(node, 'node')}/heartbeat", self._node_token, json=req.model_dump(mode="json")
        )
        return DesiredState.model_validate(data)

    async def desired(self, node: str, after: int, wait_s: float) -> DesiredState:
        data = await self._send(
            "GET",
            f"/v1/agents/{q(node, 'node')}/desired",
            self._node_token,
            params={"after": after, "wait": wait_s},
            timeout=wait_s + self._timeout,
        )
        return DesiredState.model_validate(data)

    async def ship_logs(self, node: str, job_id: str, generation: int, rank: int, offset: int, data: bytes) -> int:
        path = f"/v1/agents/{q(node, 'node')}/logs/{q(job_id, 'job')}/{generation}/{rank}"
        out = await self._send("PUT", path, self._node_token, params={"offset": offset}, content=data)
        return int(out["size"])

    async def close(self) -> None:
        await self._http.aclose()
