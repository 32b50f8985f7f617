"""Client errors, each tied to the CLI exit code it maps to."""

from __future__ import annotations

import json
from typing import Any


class CorralError(Exception):
    exit_code = 1

    def __init__(self, message: str, status: int = 0, detail: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class Unreachable(CorralError):
    exit_code = 3


class NothingListening(Unreachable):
    """Every head URL refused the connection: no head listens there, so the request was never sent."""


class NotACorralHead(Unreachable):
    """A server answered at the head URL, but not as a Corral head does (no Corral JSON error body)."""


def refused(exc: BaseException) -> bool:
    """Whether a connection failed because nothing listens at the address (anywhere in its chain)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class InvalidRequest(CorralError):
    """HTTP 422 or 400: the message names each bad field."""

    exit_code = 2


class NotFoundError(CorralError):
    exit_code = 4


class NotAllowedError(CorralError):
    exit_code = 5


class ConflictError(CorralError):
    exit_code = 1


def error_for(status: int, body: bytes, head_url: str = "") -> CorralError:
    """Turn an HTTP error response into the matching exception with a readable message. Given the
    ``head_url`` it came from, a response without Corral's error body (a JSON object with ``detail``)
    did not come from a Corral head: it is Unreachable (exit 3), whatever its status."""
    try:
        payload = json.loads(body) if body else {}
    except ValueError:
        payload = None
    if head_url and not (isinstance(payload, dict) and "detail" in payload):
        what = "a page that is not Corral's" if body.strip() else "an empty body, not Corral's JSON error"
        proxy = ", or a proxy in front of one that is down" if status >= 500 else ""
        return NotACorralHead(
            f"{head_url} answered HTTP {status} with {what}: is it a Corral head{proxy}?"
            " Check CORRAL_HEAD, or the head URL in `corral config`",
            status,
        )
    if payload is None:
        payload = {"detail": body.decode(errors="replace")}
    detail = payload.get("detail", payload) if isinstance(payload, dict) else payload
    message = _message(detail) or f"HTTP {status}"
    kind: type[CorralError]
    if status in (400, 422):
        kind = InvalidRequest
    elif status == 404:
        kind = NotFoundError
    elif status in (401, 403):
        kind = NotAllowedError
    elif status == 409:
        kind = ConflictError
    else:
        kind = CorralError
    return kind(message, status, detail)


def _message(detail: Any) -> str:
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        lines = []
        for item in detail:
            if isinstance(item, dict):
                field = item.get("field") or ".".join(str(p) for p in item.get("loc", [])[1:])
                msg = str(item.get("msg", ""))
                lines.append(f"{field}: {msg}" if field else msg)
            else:
                lines.append(str(item))
        return "\n".join(lines)
    return json.dumps(detail) if detail else ""
