"""/v1/nodes, /v1/status and the join token."""

from __future__ import annotations

from fastapi import APIRouter

from corral.api import JoinTokenOut, NodeOut, StatusOut
from corral.head.routers.deps import Admin, Runtime, User
from corral.head.services import auth, nodes

router = APIRouter(prefix="/v1", tags=["cluster"])


@router.get("/nodes", response_model=list[NodeOut])
def list_nodes(rt: Runtime, who: User) -> list[NodeOut]:
    return nodes.list_nodes(rt)


@router.get("/status", response_model=StatusOut)
def status(rt: Runtime, who: User) -> StatusOut:
    return nodes.status(rt)


@router.get("/join-token", response_model=JoinTokenOut)
def join_token(rt: Runtime, who: Admin) -> JoinTokenOut:
    """The token agents register with (admins only)."""
    return JoinTokenOut(token=auth.join_token(rt))
