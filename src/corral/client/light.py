"""A standard-library transport (http.client): fast to import, for short CLI calls."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from corral.client.calls import Call
from corral.client.config import HOW_TO_START, check_token, head_urls, unreachable_hint
from corral.client.errors import NothingListening, Unreachable, error_for, refused


class LightTransport:
    """One head URL, or several separated by commas: a call that cannot connect tries the next one."""

    def __init__(self, head_url: str, token: str = "", timeout_s: float = 30.0) -> None:
        self._heads = [_Head.parse(url) for url in head_urls(head_url) or [head_url]]
        self._token = check_token(token, "token")
        self._timeout = timeout_s
        self.answered = False  # whether a head has answered a call through this transport

    @property
    def head_url(self) -> str:
        return self._heads[0].url

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
        failures, all_refused = [], True
        for head in list(self._heads):
            conn = head.connection(timeout)
            sent = False
            try:
                conn.request(call.method, call.target(), body=body, headers=headers)
                sent = True
                response = conn.getresponse()
            except (TimeoutError, ConnectionError, socket.gaierror, OSError) as exc:
                conn.close()
                if sent and isinstance(exc, TimeoutError):  # no answer in time: the head may have carried it out
                    raise Unreachable(
                        f"the head at {head.url} did not answer within {timeout:g} s; the request may still have"
                        " been carried out (check with `corral jobs` or `corral status`)"
                    ) from None
                failures.append(f"{head.url} ({exc})")
                all_refused = all_refused and refused(exc)
                continue
            self.answered = True
            if head is not self._heads[0]:  # remember the head that answered
                self._heads.remove(head)
                self._heads.insert(0, head)
            return conn, response
        kind = NothingListening if all_refused else Unreachable
        raise kind(f"cannot reach the Corral head at {'; '.join(failures)}; {unreachable_hint(failures)}")

    def send(self, call: Call) -> Any:
        conn, response = self._request(call, self._timeout)
        try:
            body = response.read()
        finally:
            conn.close()
        if response.status >= 400:
            raise error_for(response.status, body, self.head_url)
        return json.loads(body) if body else None

    def stream(self, call: Call) -> Iterator[bytes]:
        conn, response = self._request(call, None)
        try:
            if response.status >= 400:
                raise error_for(response.status, response.read(), self.head_url)
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    return
                yield chunk
        except (OSError, http.client.HTTPException) as exc:  # a reset, or a response cut short
            raise Unreachable(f"lost the connection to the head at {self.head_url} ({exc!r}); {HOW_TO_START}") from None
        finally:
            conn.close()


class _Head:
    def __init__(self, url: str, https: bool, host: str, port: int) -> None:
        self.url, self.https, self.host, self.port = url, https, host, port

    @classmethod
    def parse(cls, head_url: str) -> _Head:
        expected = f"bad head URL {head_url!r}: expected http://HOST:PORT"
        try:
            parts = urlsplit(head_url)
            port = parts.port
        except ValueError as exc:  # a port past 65535 or not a number, an unclosed IPv6 bracket
            raise Unreachable(f"{expected} ({exc})") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Unreachable(expected)
        https = parts.scheme == "https"
        return cls(head_url, https, parts.hostname, port or (443 if https else 80))

    def connection(self, timeout: float | None) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=timeout)
