"""Users (role and teams) and their bearer tokens: add, list, create, revoke."""

from __future__ import annotations

import re

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from corral.api.users import DEFAULT_TEAMS, TokenCreated, TokenIn, TokenOut, UserIn, UserOut, WhoAmI
from corral.head.runtime import HeadRuntime
from corral.head.security import TOKEN_ID_LENGTH, Principal, Role, hash_token, new_token, token_id
from corral.head.services.auth import effective_role
from corral.head.services.common import Conflict, NotAllowed, NotFound
from corral.head.store.tables import TokenRow, UserRow
from corral.spec import ClusterConfig, JobSpec

TOKEN_PREFIX = {Role.ADMIN: "ca", Role.USER: "cu"}


def add_user(rt: HeadRuntime, spec: UserIn) -> tuple[UserOut, bool]:
    """Create the user, or set the role and teams of an existing one; answers (user, created)."""
    now = rt.clock.now()
    with rt.write() as session:
        row = session.get(UserRow, spec.name)
        created = row is None
        if row is None:
            row = UserRow(name=spec.name, role=spec.role, teams=list(spec.teams), created_at=now)
            session.add(row)
        else:
            row.role, row.teams = spec.role, list(spec.teams)
        return _user_out(row, rt.config.current), created


def list_users(rt: HeadRuntime) -> list[UserOut]:
    with rt.read() as session:
        config = rt.config.current
        return [_user_out(row, config) for row in session.scalars(select(UserRow).order_by(UserRow.name))]


def whoami(who: Principal, config: ClusterConfig) -> WhoAmI:
    return WhoAmI(user=who.user, role=who.role.value, teams=list(teams_of(who, config)))


def teams_of(who: Principal, config: ClusterConfig) -> tuple[str, ...]:
    """The user's teams, their default first. A user given no team of their own (only ``default``, what
    `corral user add` gives without --team) whom the cluster config lists under a team's ``members``
    has that team first: their jobs are charged to it unless they name another. A user with teams of their
    own keeps their first as the default, and the config's team comes last."""
    return _with_config_team(who.user, who.teams, config)


def _with_config_team(user: str, teams: tuple[str, ...], config: ClusterConfig) -> tuple[str, ...]:
    member_of = config.team_of(user)
    if member_of is None or member_of in teams:
        return teams
    if teams == DEFAULT_TEAMS:
        return (member_of, *DEFAULT_TEAMS)
    return (*teams, member_of)  # a member there too, though not by default


def create_token(rt: HeadRuntime, who: Principal, spec: TokenIn) -> TokenCreated:
    """A new token for the caller, or (admins only) for any registered user, with that user's role."""
    user = spec.user or who.user
    if user != who.user and not who.is_admin:
        raise NotAllowed("only an admin may create tokens for another user")
    now = rt.clock.now()
    with rt.write() as session:
        record = session.get(UserRow, user)
        if record is not None:
            role = Role(record.role)
        elif user == who.user:
            role = who.role  # a user without a record (the first admin) gets their own role
        else:
            raise NotFound(f"no user {user!r}; add them first with `corral user add {user}`")
        token = new_token(TOKEN_PREFIX.get(role, "cu"))
        row = TokenRow(hash=hash_token(token), user=user, role=role.value, name=spec.name, created_at=now)
        session.add(row)
        return TokenCreated(token=token, **_token_out(row).model_dump())


def list_tokens(rt: HeadRuntime, who: Principal) -> list[TokenOut]:
    """The caller's tokens; an admin sees every user's (never the join token's secret, nor any secret)."""
    with rt.read() as session:
        query = select(TokenRow).order_by(TokenRow.created_at)
        if not who.is_admin:
            query = query.where(TokenRow.user == who.user, TokenRow.role != Role.AGENT.value)
        rows = list(session.scalars(query))
        users = {u.name: u for u in session.scalars(select(UserRow).where(UserRow.name.in_({r.user for r in rows})))}
        return [_token_out(row, effective_role(row.role, users.get(row.user))) for row in rows]


def revoke_token(rt: HeadRuntime, who: Principal, tid: str) -> TokenOut:
    """Delete a token by its id: one's own, or (admins) anyone's. Unknown and others' ids are both 404."""
    with rt.write() as session:
        row = _by_id(session, tid)
        if row is not None and who.is_admin and row.role == Role.AGENT.value:
            raise Conflict(
                f"token {tid!r} is the agents' join token: it cannot be revoked (agents on every node use it)"
            )
        if row is None or (not who.is_admin and row.user != who.user) or row.role == Role.AGENT.value:
            raise NotFound(f"no token {tid!r} (see `corral token list`)")
        out = _token_out(row)
        session.execute(delete(TokenRow).where(TokenRow.hash == row.hash))
        return out


def _by_id(session: Session, tid: str) -> TokenRow | None:
    if not re.fullmatch(f"[0-9a-f]{{{TOKEN_ID_LENGTH}}}", tid):
        return None
    return session.scalars(select(TokenRow).where(TokenRow.hash.startswith(tid))).first()


def _user_out(row: UserRow, config: ClusterConfig) -> UserOut:
    """The user as ``whoami`` shows them: their teams with the cluster config's team, the default first."""
    teams = _with_config_team(row.name, tuple(str(t) for t in row.teams), config)
    return UserOut(name=row.name, role=row.role, teams=list(teams), created_at=row.created_at)


def _token_out(row: TokenRow, role: Role | None = None) -> TokenOut:
    shown = (role or Role(row.role)).value
    return TokenOut(id=token_id(row.hash), user=row.user, role=shown, name=row.name, created_at=row.created_at)


def team_checked(spec: JobSpec, who: Principal, config: ClusterConfig, prefix: str = "") -> JobSpec:
    """The spec in the user's default team if it names none; refused (403) if it names a team the user is not in.

    A user is in the teams of their record and in the team the cluster config lists them under; see
    ``teams_of`` for which is their default. Admins may submit to any team.
    """
    teams = teams_of(who, config)
    if spec.team is None and teams:
        spec = spec.model_copy(update={"team": teams[0]})
    team = spec.team
    if team is None or who.may_submit_to(team) or config.team_of(who.user) == team:
        return spec
    theirs = ", ".join(teams)
    raise NotAllowed(
        f"{prefix}team: user {who.user} is not a member of team {team!r} (their teams: {theirs}); "
        "an admin can add them with `corral user add`"
    )
