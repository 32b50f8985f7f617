"""A standard-library transport (http.client): fast to import, for short CLI calls."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from corral.client.calls import Call
from corral.client.config import HOW_TO_START
from corral.client.errors import Unreachable, error_for


class LightTransport:
    def __init__(self, head_url: str, token: str = "", timeout_s: float = 30.0) -> None:
        parts = urlsplit(head_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unreachable(f"bad head URL {head_url!r}: expected http://HOST:PORT")
        self.head_url = head_url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._token = token
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self, timeout: float | None) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return kind(self._host, self._port, timeout=timeout)

    def _request(
        self, call: Call, timeout: float | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        headers = {"Accept": "application/json", **call.headers}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        body = None
        if call.json is not None:
            body = json.dumps(call.json).encode()
            headers["Content-Type"] = "application/json"
        conn = self._connection(timeout)
        try:
            conn.request(call.method, call.target(), body=body, headers=headers)
            return conn, conn.getresponse()
        except (TimeoutError, ConnectionError, socket.gaierror, OSError) as exc:
            conn.close()
            raise Unreachable(f"cannot reach the Corral head at {self.head_url} ({exc}); {HOW_TO_START}") from None

    def send(self, call: Call) -> Any:
        conn, response = self._request(call, self._timeout)
        try:
            body = response.read()
        finally:
            conn.close()
        if response.status >= 400:
            raise error_for(response.status, body)
        return json.loads(body) if body else None

    def stream(self, call: Call) -> Iterator[bytes]:
        conn, response = self._request(call, None)
        try:
            if response.status >= 400:
                raise error_for(response.status, response.read())
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    return
                yield chunk
        except OSError as exc:
            raise Unreachable(f"lost the connection to {self.head_url}: {exc}") from None
        finally:
            conn.close()
