"""Error responses: 422 with field paths, 404 for unknown ids, 403/409 with a message."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from corral.head.services.common import Conflict, Infeasible, NotAllowed, NotFound
from corral.spec.errors import field_path


def _clean(message: str) -> str:
    return message[len("Value error, ") :] if message.startswith("Value error, ") else message


def _validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        body_loc = loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc
        message = "unknown field" if err.get("type") == "extra_forbidden" else _clean(str(err.get("msg", "")))
        detail.append({"loc": list(loc), "field": field_path(body_loc), "msg": message, "type": err.get("type")})
    return JSONResponse(status_code=422, content={"detail": detail})


def _infeasible(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Infeasible)
    return JSONResponse(
        status_code=422,
        content={
            "detail": [
                {"loc": ["body", *exc.field.split(".")], "field": exc.field, "msg": str(exc), "type": "infeasible"}
            ]
        },
    )


def _status(code: int) -> Any:
    def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=code, content={"detail": str(exc)})

    return handler


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(Infeasible, _infeasible)
    app.add_exception_handler(NotFound, _status(404))
    app.add_exception_handler(NotAllowed, _status(403))
    app.add_exception_handler(Conflict, _status(409))
