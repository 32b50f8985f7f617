"""Users (role and teams) and their bearer tokens: add, list, create, revoke."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from corral.api.users import AGENT_USER, DEFAULT_TEAMS, TokenCreated, TokenIn, TokenOut, UserIn, UserOut, WhoAmI
from corral.head.runtime import HeadRuntime
from corral.head.security import TOKEN_ID_LENGTH, Principal, Role, hash_token, new_token, token_id
from corral.head.services.auth import effective_role
from corral.head.services.common import Conflict, Infeasible, NotAllowed, NotFound
from corral.head.store.tables import TokenRow, UserRow
from corral.spec import ClusterConfig, JobSpec

TOKEN_PREFIX = {Role.ADMIN: "ca", Role.USER: "cu"}


def add_user(rt: HeadRuntime, spec: UserIn) -> tuple[UserOut, bool]:
    """Create the user, or set the role and teams of an existing one; answers (user, created). A role or teams
    left out stay as they are (a new user: a user's role, team ``default``; one who held a token without a
    record, as the first admin does: that token's role). A change that would leave no admin able to act is
    refused (409)."""
    now = rt.clock.now()
    with rt.write() as session:
        admins = _acting_admins(session)
        row = session.get(UserRow, spec.name)
        created = row is None
        _check_teams_known(spec.teams or (), rt.config.current)
        if row is None:
            role = spec.role or _unrecorded_roles(session).get(spec.name, Role.USER.value)
            row = UserRow(name=spec.name, role=role, teams=list(spec.teams or DEFAULT_TEAMS), created_at=now)
            session.add(row)
        else:
            if spec.role is not None:
                row.role = spec.role
            if spec.teams is not None:
                row.teams = list(spec.teams)
        session.flush()
        if admins and not _acting_admins(session):
            raise Conflict(
                f"user {spec.name} is the last admin with a token: make another user admin, and give them a token"
                " (`corral token create --user NAME`), first"
            )
        return _user_out(row, rt.config.current), created


def list_users(rt: HeadRuntime) -> list[UserOut]:
    """The users added, and those who hold a token without having been added (the first admin)."""
    with rt.read() as session:
        config = rt.config.current
        rows = list(session.scalars(select(UserRow)))
        out = [_user_out(row, config) for row in rows]
        for name, (role, since) in _unrecorded(session).items():
            teams = list(_with_config_team(name, DEFAULT_TEAMS, config))  # as ``teams_of`` gives them
            out.append(UserOut(name=name, role=role, teams=teams, created_at=since))
        return sorted(out, key=lambda u: u.name)


def _unrecorded(session: Session) -> dict[str, tuple[str, datetime]]:
    """Users who hold a token but were never added: their tokens' role (admin if any is) and first token's time."""
    recorded = set(session.scalars(select(UserRow.name)))
    found: dict[str, tuple[str, datetime]] = {}
    query = select(TokenRow.user, TokenRow.role, TokenRow.created_at).where(TokenRow.role != Role.AGENT.value)
    for user, role, created_at in session.execute(query.order_by(TokenRow.created_at)):
        if user in recorded:
            continue
        known = found.get(user)
        if known is None:
            found[user] = (role, created_at)
        elif role == Role.ADMIN.value:
            found[user] = (role, known[1])
    return found


def _unrecorded_roles(session: Session) -> dict[str, str]:
    return {user: role for user, (role, _) in _unrecorded(session).items()}


def _acting_admins(session: Session) -> set[str]:
    """Admins who can act: an added admin with a token, or a user with an admin token and no record."""
    holders = set(session.scalars(select(TokenRow.user).where(TokenRow.role != Role.AGENT.value)))
    added = set(session.scalars(select(UserRow.name).where(UserRow.role == Role.ADMIN.value)))
    unrecorded = {user for user, role in _unrecorded_roles(session).items() if role == Role.ADMIN.value}
    return (added & holders) | unrecorded


def whoami(who: Principal, config: ClusterConfig) -> WhoAmI:
    return WhoAmI(user=who.user, role=who.role.value, teams=list(teams_of(who, config)))


def teams_of(who: Principal, config: ClusterConfig) -> tuple[str, ...]:
    """The user's teams, their default first. A user given no team of their own (only ``default``, what
    `corral user add` gives without --team) whom the cluster config lists under a team's ``members``
    has that team first: their jobs are charged to it unless they name another. A user with teams of their
    own keeps their first as the default, and the config's team comes last."""
    return _with_config_team(who.user, who.teams or DEFAULT_TEAMS, config)  # no record (the first admin): default


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
        elif user == AGENT_USER:
            raise NotFound(f"no user {user!r}: the name is kept for the agents' join token (`corral join-token`)")
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
        admins = _acting_admins(session)
        row = _by_id(session, tid)
        if row is not None and who.is_admin and row.role == Role.AGENT.value:
            raise Conflict(
                f"token {tid!r} is the agents' join token: it cannot be revoked (agents on every node use it)"
            )
        if row is None or (not who.is_admin and row.user != who.user) or row.role == Role.AGENT.value:
            raise NotFound(f"no token {tid!r} (see `corral token list`)")
        out = _token_out(row)
        session.execute(delete(TokenRow).where(TokenRow.hash == row.hash))
        if admins and not _acting_admins(session):
            raise Conflict(
                f"token {tid!r} is the last token of the last admin ({row.user}): give another admin a token"
                " (`corral token create --user NAME`), or create a new one for yourself, first"
            )
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


def _check_teams_known(teams: Sequence[str], config: ClusterConfig, field: str = "") -> None:
    """With teams in the cluster config, a user's or a job's teams are among them (or ``default``): a typo would
    put them outside every quota. ``field``: the field to name (default ``teams[INDEX]``)."""
    if not config.teams:
        return
    for index, team in enumerate(teams):
        if team not in config.teams and team not in DEFAULT_TEAMS:
            known = ", ".join(sorted(config.teams))
            what = "the organisation, not a team" if team == config.organisation else "not a team of the cluster config"
            message = f"{team!r} is {what} (teams: {known}, or {DEFAULT_TEAMS[0]})"
            raise Infeasible(field or f"teams[{index}]", message)


def team_checked(spec: JobSpec, who: Principal, config: ClusterConfig, prefix: str = "") -> JobSpec:
    """The spec in the user's default team if it names none; refused (403) if it names a team the user is not in.

    A user is in the teams of their record and in the team the cluster config lists them under; see
    ``teams_of`` for which is their default. Admins may submit to any team.
    """
    teams = teams_of(who, config)
    if spec.team is None and teams:
        spec = spec.model_copy(update={"team": teams[0]})
    team = spec.team
    if team is not None:
        _check_teams_known([team], config, f"{prefix}team")
    if team is None or who.may_submit_to(team) or config.team_of(who.user) == team:
        return spec
    theirs = ", ".join(teams)
    raise NotAllowed(
        f"{prefix}team: user {who.user} is not a member of team {team!r} (their teams: {theirs}); "
        "an admin can add them with `corral user add`"
    )
