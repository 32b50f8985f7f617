"""Bearer tokens: generated here, stored only as hashes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

TOKEN_ID_LENGTH = 12


class Role(StrEnum):
    ADMIN = "admin"
    USER = "user"
    AGENT = "agent"  # joins nodes; cannot act on jobs


@dataclass(frozen=True)
class Principal:
    user: str
    role: Role
    # The teams the user may submit to, their default first. Empty for a token whose user has no
    # record (the first admin's, or one made before users existed): such a token is not held to teams.
    teams: tuple[str, ...] = ()

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def may_submit_to(self, team: str) -> bool:
        return self.is_admin or not self.teams or team in self.teams


def new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(24)}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_id(token_hash: str) -> str:
    """A token's public name: the start of its hash (reveals nothing useful about the token)."""
    return token_hash[:TOKEN_ID_LENGTH]


def same_token(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)
