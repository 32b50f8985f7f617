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
    """Turn an HTTP error response into the matching exception with a readable message."""
    try:
        payload = json.loads(body) if body else {}
    except ValueError:
        if status in (404, 405, 501) and head_url:  # the route or method is unknown there: not a Corral head
            return Unreachable(
                f"{head_url} answered HTTP {status} with a page that is not Corral's: is it a Corral head?"
                " Check CORRAL_HEAD, or the head URL in `corral config`"
            )
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
