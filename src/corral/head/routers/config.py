"""/v1/config: the cluster config in force (teams, quotas, priority classes, queues), and reloading it."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from corral.head.routers.deps import Runtime, User
from corral.head.runtime import HeadRuntime
from corral.head.services.common import Conflict, NotAllowed
from corral.spec import SpecError

router = APIRouter(prefix="/v1/config", tags=["config"])


def _out(rt: HeadRuntime) -> dict[str, Any]:
    holder = rt.config
    return {
        "path": None if holder.path is None else str(holder.path),
        "config": holder.current.model_dump(mode="json", by_alias=True),
        "problem": holder.problem,  # why the file as it is now is not in force; null when it is
    }


@router.get("")
def show(rt: Runtime, who: User) -> dict[str, Any]:
    """The cluster config in force and the file it came from."""
    return _out(rt)


@router.post("/reload", response_model=None)
async def reload(rt: Runtime, who: User) -> dict[str, Any] | JSONResponse:
    """Admin only: read the config file again. A file that does not validate, or is empty, is refused
    (422, with the path of each bad field) and the config in force stays; a head started without a
    config file answers 409."""
    if not who.is_admin:
        raise NotAllowed("only an admin may reload the cluster config")
    if rt.config.path is None:
        raise Conflict(
            "the head was started without --config, so there is no file to reload; start it with"
            " `corral head --config FILE` (or `corral up --config FILE`)"
        )
    try:
        await asyncio.to_thread(rt.config.reload)
    except SpecError as exc:
        detail = [{"loc": ["config", *e.field.split(".")], "field": e.field, "msg": e.message} for e in exc.errors]
        return JSONResponse(status_code=422, content={"detail": detail})
    rt.fair_share_cache = None
    return _out(rt)
