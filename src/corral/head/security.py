"""Bearer tokens: generated here, stored only as hashes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    USER = "user"
    AGENT = "agent"  # joins nodes; cannot act on jobs


@dataclass(frozen=True)
class Principal:
    user: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


def new_token(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(24)}"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_token(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)
