"""/v1/users and /v1/tokens: who may use the cluster, and their bearer tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from corral.api.users import TokenCreated, TokenIn, TokenOut, UserIn, UserOut, WhoAmI
from corral.head.routers.deps import Admin, Runtime, User
from corral.head.services import users as service
from corral.head.services.auth import TokenCache

router = APIRouter(prefix="/v1", tags=["users"])


def _forget_cached_tokens(request: Request) -> None:
    cache: TokenCache = request.app.state.tokens
    cache.forget()


@router.get("/whoami", response_model=WhoAmI)
def whoami(rt: Runtime, who: User) -> WhoAmI:
    """The caller's user name, role and teams (their default first)."""
    return service.whoami(who, rt.config.current)


@router.get("/users", response_model=list[UserOut])
def list_users(rt: Runtime, who: Admin) -> list[UserOut]:
    """Every user: those added, and those who hold a token without being added (the first admin)."""
    return service.list_users(rt)


@router.post("/users", response_model=UserOut, status_code=201)
def add_user(spec: UserIn, rt: Runtime, who: Admin, request: Request, response: Response) -> UserOut:
    """Add a user, or change an existing user's role and teams (admins only; 200 when it existed)."""
    out, created = service.add_user(rt, spec)
    if not created:
        response.status_code = 200
    _forget_cached_tokens(request)  # a new record can change a role too: the first admin's, once recorded
    return out


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(rt: Runtime, who: User) -> list[TokenOut]:
    """Your tokens (admins: everyone's); ids and labels only, never the secrets."""
    return service.list_tokens(rt, who)


@router.post("/tokens", response_model=TokenCreated, status_code=201)
def create_token(rt: Runtime, who: User, spec: TokenIn | None = None) -> TokenCreated:
    """A new bearer token for yourself, or (admins) for any registered user. The secret is shown only here."""
    return service.create_token(rt, who, spec or TokenIn())


@router.delete("/tokens/{token_id}", response_model=TokenOut)
def revoke_token(token_id: str, rt: Runtime, who: User, request: Request) -> TokenOut:
    """Revoke one of your tokens (admins: anyone's). Other heads stop accepting it within seconds."""
    out = service.revoke_token(rt, who, token_id)
    _forget_cached_tokens(request)
    return out
