"""Wire schemas for users and their bearer tokens."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from corral.spec.names import LABEL_PATTERN, USER_NAME_PATTERN, USER_NAME_RULE
from corral.spec.wording import first_repeat

NAME_PATTERN = USER_NAME_PATTERN
NAME_RULE = USER_NAME_RULE
TEAM_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$"  # as a job's `team` and the cluster config's teams
TEAM_RULE = "1-63 characters: letters, digits, '_', '.' and '-', starting with a letter or digit"
AGENT_USER = "agent"
"""The user the agents' join token acts as; no person may be added under that name."""
DEFAULT_TEAMS = ("default",)
"""A user's teams when `corral user add` gives none."""


class UserIn(BaseModel):
    """`corral user add`: a new user, or new role and teams for an existing one."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description=NAME_RULE)
    role: Literal["admin", "user"] | None = Field(
        default=None, description="what the user may do; left out: user for a new user, unchanged for an existing one"
    )
    teams: Annotated[list[str], Field(min_length=1, max_length=64)] | None = Field(
        default=None,
        description=(
            "teams the user may submit to, the first their default; left out: default for a new user,"
            " unchanged for an existing one"
        ),
    )

    @field_validator("name")
    @classmethod
    def _not_the_agents(cls, value: str) -> str:
        if value == AGENT_USER:
            raise ValueError(f"the name {AGENT_USER!r} is kept for the agents' join token; choose another")
        return value

    @field_validator("teams")
    @classmethod
    def _teams(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for team in value:
            if not re.fullmatch(TEAM_PATTERN, team):
                raise ValueError(f"bad team name {team!r}: {TEAM_RULE}")
        twice = first_repeat(value)
        if twice is not None:
            raise ValueError(f"team {twice!r} is listed twice; list each team once")
        return value


class UserOut(BaseModel):
    name: str
    role: str
    teams: list[str] = Field(description="the first is the user's default team")
    created_at: datetime | None = None


class TokenIn(BaseModel):
    """`corral token create`: a token for yourself, or (admins) for any user."""

    model_config = ConfigDict(extra="forbid")

    user: str | None = Field(default=None, pattern=NAME_PATTERN, description="whose token; yourself when omitted")
    name: str = Field(default="", max_length=64, pattern=LABEL_PATTERN, description="a label to recognise it by")


class TokenOut(BaseModel):
    id: str = Field(description="what `corral token revoke` takes; not a secret")
    user: str
    role: str
    name: str
    created_at: datetime


class TokenCreated(TokenOut):
    token: str = Field(description="the bearer token itself: shown once, stored only as a hash")


class WhoAmI(BaseModel):
    user: str
    role: str
    teams: list[str]
