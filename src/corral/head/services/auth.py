"""Tokens: the admin's and the agents' join token, created on first start; lookups by hash."""

from __future__ import annotations

import getpass
import json
import logging
import os
import time
from pathlib import Path

from sqlalchemy import select

from corral.api.users import AGENT_USER
from corral.head.runtime import HeadRuntime
from corral.head.security import Principal, Role, hash_token, new_token
from corral.head.store.tables import MetaRow, TokenRow, UserRow

CLIENT_CONFIG = "client.json"

log = logging.getLogger(__name__)


class TokenCache:
    """Token hash → principal, so a request costs no database read once seen.

    Entries live ``ttl_s`` seconds: a token revoked (or a user changed) through another head
    sharing the database stops working here within that time; on this head at once.
    """

    def __init__(self, ttl_s: float = 5.0) -> None:
        self.ttl_s = ttl_s
        self._known: dict[str, tuple[Principal, float]] = {}

    def known(self, token: str) -> Principal | None:
        """The principal if this head has seen the token lately (no database read), else None."""
        hit = self._known.get(hash_token(token))
        return hit[0] if hit is not None and hit[1] > time.monotonic() else None

    def lookup(self, rt: HeadRuntime, token: str) -> Principal | None:
        known = self.known(token)
        if known is not None:
            return known
        digest = hash_token(token)
        now = time.monotonic()
        with rt.read() as session:
            row = session.get(TokenRow, digest)
            user = session.get(UserRow, row.user) if row is not None else None
        if row is None:
            self._known.pop(digest, None)
            return None
        teams = tuple(str(team) for team in user.teams) if user is not None else ()
        principal = Principal(user=row.user, role=effective_role(row.role, user), teams=teams)
        self._known[digest] = (principal, now + self.ttl_s)
        return principal

    def forget(self) -> None:
        """Drop every entry (after a revocation or a change to a user)."""
        self._known.clear()


def effective_role(token_role: str, user: UserRow | None) -> Role:
    """A token acts with its user's role as it is now (a demoted admin's tokens are a user's from then
    on); the join token, and tokens of a user without a record (the first admin), keep their own."""
    if user is None or token_role == Role.AGENT.value:
        return Role(token_role)
    return Role(user.role)


def bootstrap(rt: HeadRuntime) -> tuple[str, str]:
    """Make sure an admin token and a join token exist; return (admin token, join token).

    The admin token's plain text lives only in the client config under CORRAL_HOME;
    if that file is gone, a new admin token is made.
    """
    now = rt.clock.now()
    config = read_client_config(rt.settings.home)
    with rt.write() as session:
        join = session.get(MetaRow, "join_token")
        if join is None:
            join = MetaRow(key="join_token", value=new_token("cj"))
            session.add(join)
            digest = hash_token(join.value)
            session.add(TokenRow(hash=digest, user=AGENT_USER, role=Role.AGENT.value, name="join", created_at=now))
        admin = config.get("token")
        if not admin or session.get(TokenRow, hash_token(admin)) is None:
            admin, user = new_token("ca"), local_user()
            session.add(
                TokenRow(hash=hash_token(admin), user=user, role=Role.ADMIN.value, name="admin", created_at=now)
            )
            record = session.get(UserRow, user)
            if record is not None and record.role != Role.ADMIN.value:
                # Whoever runs the head owns its database: a new admin token is how they get admin back.
                log.warning(
                    "user %s runs the head and was a %s: admin again, with the new admin token", user, record.role
                )
                record.role = Role.ADMIN.value
        join_token = join.value
    return admin, join_token


def join_token(rt: HeadRuntime) -> str:
    with rt.read() as session:
        value = session.scalar(select(MetaRow.value).where(MetaRow.key == "join_token"))
    if value is None:
        raise LookupError("the head has no join token yet")
    return value


def local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "admin"


def read_client_config(home: Path) -> dict[str, str]:
    try:
        data = json.loads((home / CLIENT_CONFIG).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {k: str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_client_config(home: Path, head_url: str, token: str, join: str) -> None:
    """Write the config atomically, readable only by its owner (it holds the admin token)."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / CLIENT_CONFIG
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"head_url": head_url, "token": token, "join_token": join}, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)
