"""/v1/nodes, /v1/status and the join token."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query

from corral.api import DrainRequest, EventOut, JoinTokenOut, NodeOut, StatusOut
from corral.head.routers.deps import Admin, Runtime, User
from corral.head.services import auth, events, nodes

router = APIRouter(prefix="/v1", tags=["cluster"])
EVENT_POLL_S = 0.25


@router.get("/nodes", response_model=list[NodeOut])
def list_nodes(rt: Runtime, who: User) -> list[NodeOut]:
    return nodes.list_nodes(rt)


@router.post("/nodes/{name}/drain", response_model=NodeOut)
def drain(name: str, rt: Runtime, who: Admin, body: DrainRequest | None = None) -> NodeOut:
    """Stop placing new work on a node (admins only); jobs already there keep running."""
    return nodes.set_drained(rt, who, name, True, body.reason if body else "")


@router.post("/nodes/{name}/undrain", response_model=NodeOut)
def undrain(name: str, rt: Runtime, who: Admin) -> NodeOut:
    """Let a drained node take work again (admins only)."""
    return nodes.set_drained(rt, who, name, False, "")


@router.get("/events", response_model=list[EventOut])
async def list_events(
    rt: Runtime,
    who: User,
    after: Annotated[int, Query(description="only events after this id; -1 for the newest")] = -1,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    job: Annotated[str | None, Query(description="only this job's events")] = None,
    wait: Annotated[float, Query(ge=0, le=60, description="seconds to wait for a new event")] = 0.0,
) -> list[EventOut]:
    """State changes of jobs and nodes, oldest first. With `wait`, answers as soon as one exists."""
    deadline = rt.clock.monotonic() + wait
    while True:
        found = await asyncio.to_thread(events.list_events, rt, who, after, limit, job)
        if found or after < 0 or rt.stopping or rt.clock.monotonic() >= deadline:
            return found
        await asyncio.sleep(EVENT_POLL_S)


@router.get("/status", response_model=StatusOut)
def status(rt: Runtime, who: User) -> StatusOut:
    return nodes.status(rt)


@router.get("/join-token", response_model=JoinTokenOut)
def join_token(rt: Runtime, who: Admin) -> JoinTokenOut:
    """The token agents register with (admins only)."""
    return JoinTokenOut(token=auth.join_token(rt))
