"""Request dependencies: the runtime and the caller's identity."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError

from corral.head.runtime import HeadRuntime
from corral.head.security import Principal, Role
from corral.head.services.auth import TokenCache


# Dependencies are coroutines: a plain function would cost every request a trip through the thread pool.
async def runtime(request: Request) -> HeadRuntime:
    rt: HeadRuntime = request.app.state.runtime
    return rt


async def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(
            401,
            "missing bearer token: send 'Authorization: Bearer <token>' (see `corral config`)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token.strip()


async def principal(request: Request, token: Annotated[str, Depends(bearer)]) -> Principal:
    cache: TokenCache = request.app.state.tokens
    who = cache.known(token) or await asyncio.to_thread(cache.lookup, request.app.state.runtime, token)
    if who is None:
        raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})
    return who


async def user(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if who.role is Role.AGENT:
        raise HTTPException(403, "the join token only registers agents; use a user or admin token")
    return who


async def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.is_admin:
        raise HTTPException(403, "only an admin may do this")
    return who


Runtime = Annotated[HeadRuntime, Depends(runtime)]
User = Annotated[Principal, Depends(user)]
Admin = Annotated[Principal, Depends(admin)]
AnyPrincipal = Annotated[Principal, Depends(principal)]
Bearer = Annotated[str, Depends(bearer)]


def database_refused_input(_request: Request, exc: Exception) -> JSONResponse:
    """A value the database cannot hold (a number beyond its integers, a NUL character): the caller's input, 422."""
    assert isinstance(exc, DataError | OverflowError)
    reason = str(getattr(exc, "orig", exc)).splitlines()[0]
    message = f"a value in the request cannot be stored or compared by the database ({reason})"
    return JSONResponse(status_code=422, content={"detail": [{"loc": [], "field": "", "msg": message, "type": "data"}]})
