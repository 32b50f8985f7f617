"""/v1/nodes, /v1/status and the join token."""

from __future__ import annotations

from fastapi import APIRouter

from corral.api import DrainRequest, JoinTokenOut, NodeOut, StatusOut
from corral.head.routers.deps import Admin, Runtime, User
from corral.head.services import auth, nodes

router = APIRouter(prefix="/v1", tags=["cluster"])


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


@router.get("/status", response_model=StatusOut)
def status(rt: Runtime, who: User) -> StatusOut:
    return nodes.status(rt)


@router.get("/join-token", response_model=JoinTokenOut)
def join_token(rt: Runtime, who: Admin) -> JoinTokenOut:
    """The token agents register with (admins only)."""
    return JoinTokenOut(token=auth.join_token(rt))
