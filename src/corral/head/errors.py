"""Error responses: 422 with field paths, 404 for unknown ids, 403/409 with a message."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from corral.api import SubmitBatch
from corral.head.services.common import Conflict, Infeasible, NotAllowed, NotFound
from corral.spec import JobSpec
from corral.spec.errors import field_names as _field_names
from corral.spec.errors import field_path, user_loc
from corral.spec.errors import model_at as _model_at
from corral.spec.wording import phrase


def _clean(message: str) -> str:
    return message[len("Value error, ") :] if message.startswith("Value error, ") else message


# The body model of each route that takes one, so an unknown field's error can list the valid ones.
_BODY_MODELS: dict[str, type[BaseModel]] = {"/v1/jobs": JobSpec, "/v1/jobs/batch": SubmitBatch}


def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    detail: list[dict[str, Any]] = []
    body_model = _BODY_MODELS.get(request.url.path)
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        body_loc = loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc
        kind = err.get("type")
        if kind == "json_invalid":
            position = body_loc[0] if body_loc else "?"
            detail.append(
                {
                    "loc": list(loc),
                    "field": "",
                    "type": kind,
                    "msg": f"the body is not valid JSON (at character {position}): "
                    f"{err.get('ctx', {}).get('error', 'syntax error')}",
                }
            )
            continue
        message = phrase(err, body_model, user_loc(body_loc)) or _clean(str(err.get("msg", "")))
        if kind == "extra_forbidden":
            parent = _model_at(body_model, body_loc[:-1]) if body_model is not None else None
            message = "unknown field" + (f"; valid fields are {', '.join(_field_names(parent))}" if parent else "")
        detail.append({"loc": list(loc), "field": field_path(body_loc), "msg": message, "type": kind})
    return JSONResponse(status_code=422, content={"detail": detail})


def _infeasible(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Infeasible)
    return JSONResponse(
        status_code=422,
        content={
            "detail": [
                {"loc": [exc.where, *exc.field.split(".")], "field": exc.field, "msg": str(exc), "type": "infeasible"}
            ]
        },
    )


def _status(code: int) -> Any:
    def handler(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=code, content={"detail": str(exc)})

    return handler


def _internal(_request: Request, exc: Exception) -> JSONResponse:
    """An error the head did not expect: still Corral's JSON error body, so a client tells it from another
    server's page (the traceback goes to the head's log)."""
    return JSONResponse(
        status_code=500, content={"detail": f"internal error in the head ({type(exc).__name__}); see the head's log"}
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _internal)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(Infeasible, _infeasible)
    app.add_exception_handler(NotFound, _status(404))
    app.add_exception_handler(NotAllowed, _status(403))
    app.add_exception_handler(Conflict, _status(409))
