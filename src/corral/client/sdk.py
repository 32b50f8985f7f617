"""The Python client for users and scripts: httpx with connection reuse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from corral.client.calls import Call, HeadApi
from corral.client.config import check_token, head_urls, load_config, unreachable_hint
from corral.client.errors import NothingListening, Unreachable, error_for, refused


class HttpxTransport:
    """One head URL, or several separated by commas: a call that cannot connect tries the next one."""

    def __init__(
        self, head_url: str, token: str = "", timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        headers = {"Authorization": f"Bearer {check_token(token, 'token')}"} if token else {}
        self._urls = head_urls(head_url) or [head_url]
        self.head_url = self._urls[0]
        self._http = httpx.Client(headers=headers, timeout=timeout_s, transport=transport)
        self.answered = False  # whether a head has answered a call through this transport

    def send(self, call: Call) -> Any:
        failures, all_refused = [], True
        for url in list(self._urls):
            try:
                response = self._http.request(
                    call.method, url + call.path, params=list(call.params), json=call.json, headers=call.headers
                )
            except httpx.TransportError as exc:
                failures.append(f"{url} ({exc})")
                all_refused = all_refused and refused(exc)
                continue
            self.answered = True
            self._prefer(url)
            if response.status_code >= 400:
                raise error_for(response.status_code, response.content, url)
            return json.loads(response.content) if response.content else None
        kind = NothingListening if all_refused else Unreachable
        raise kind(f"cannot reach the Corral head at {'; '.join(failures)}; {unreachable_hint(failures)}")

    def _prefer(self, url: str) -> None:
        if url != self._urls[0]:
            self._urls.remove(url)
            self._urls.insert(0, url)
            self.head_url = url

    def stream(self, call: Call) -> Iterator[bytes]:
        try:
            url = self.head_url + call.path
            with self._http.stream(call.method, url, params=list(call.params), timeout=None) as response:
                if response.status_code >= 400:
                    raise error_for(response.status_code, response.read(), self.head_url)
                yield from response.iter_raw()
        except httpx.TransportError as exc:
            raise Unreachable(f"lost the connection to {self.head_url}: {exc}") from None

    def close(self) -> None:
        self._http.close()


class Client(HeadApi):
    """``Client()`` uses CORRAL_HEAD/CORRAL_TOKEN or CORRAL_HOME's config; or pass them."""

    def __init__(self, head_url: str | None = None, token: str | None = None, timeout_s: float = 30.0) -> None:
        if head_url is None:
            config = load_config()
            head_url, token = config.head_url, token if token is not None else config.token
        self._httpx = HttpxTransport(head_url, token or "", timeout_s)
        super().__init__(self._httpx)

    def close(self) -> None:
        self._httpx.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
