"""ClusterConfig: the head's ``corral.yaml`` (teams and quotas, priority classes, queues, fair share).

Field checks come from pydantic; cross-field checks (unknown parent team, a loop of parents,
a user in two teams, child teams' nominal quotas above their parent's, an unknown priority
class, ...) run after them. Every problem is reported with the dotted path of the bad field,
e.g. ``teams.vision.quotas.H100.nominal``.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from corral.spec.errors import FieldError, SpecError, field_path, from_validation_error
from corral.spec.job import MAX_PRIORITY, PRIORITY_HELP
from corral.spec.names import GPU_TYPE_RULE, USER_NAME_RULE, is_gpu_type, is_user_name
from corral.spec.quantities import MIN_GPU_SPEED, NUMBER_RE, check_gpu_speeds, parse_duration_s
from corral.spec.strict import Flag
from corral.spec.wording import shown, written
from corral.spec.yamldoc import load_yaml_document

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")
DEFAULT_HALF_LIFE_S = 7 * 86400.0
MAX_QUOTA_GPUS = 1_000_000.0
MAX_WEIGHT = 1_000_000.0
MAX_GPU_SPEED = 1000.0  # the reference type's speed is 1.0; the slowest allowed is a thousandth of it


def _duration(value: Any) -> Any:
    if isinstance(value, str) and NUMBER_RE.fullmatch(value.strip()):
        value = float(value)  # seconds, as YAML 1.1 leaves 1e3 as text
    return None if value is None else parse_duration_s(value)


def _number(expected: str, most: float) -> Callable[[Any], Any]:
    """A check that lets ``None`` and numbers up to ``most`` through (text such as ``1e3`` too), and refuses
    the rest: a boolean is not 1 or 0 GPUs."""

    def check(given: Any) -> Any:
        value = float(given) if isinstance(given, str) and NUMBER_RE.fullmatch(given.strip()) else given
        if value is None:
            return value
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and (not value > most or value == math.inf):  # infinity is refused as not finite, after this
            return value
        raise ValueError(f"expected {expected}, got {given.strip() if value is not given else written(given)}")

    return check


def _priority(value: Any) -> Any:
    exponent = isinstance(value, str) and "e" in value.lower() and NUMBER_RE.fullmatch(value.strip())
    number = float(value) if exponent else value  # 1e3, which YAML 1.1 reads as text (a quoted '10' stays text)
    number = int(number) if isinstance(number, float) and number.is_integer() else number
    if isinstance(number, int) and not isinstance(number, bool) and -MAX_PRIORITY <= number <= MAX_PRIORITY:
        return number
    raise ValueError(f"must be {PRIORITY_HELP}, got {written(value)}")


Gpus = Annotated[
    float,
    BeforeValidator(_number(f"a number of GPUs from 0 to {MAX_QUOTA_GPUS:,.0f}, such as 8 or 0.5", MAX_QUOTA_GPUS)),
    Field(strict=True, ge=0, le=MAX_QUOTA_GPUS),
]
GpuSpeed = Annotated[
    float,
    BeforeValidator(_number(f"a speed from 0.001 to {MAX_GPU_SPEED:,g}, such as 1.0 or 0.2", MAX_GPU_SPEED)),
    Field(strict=True, ge=MIN_GPU_SPEED, le=MAX_GPU_SPEED),
]
"""A GPU type's run-time speed (the cluster config's and the simulator's cluster file's ``gpu_speed``)."""


def _check_name(value: str, what: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(f"bad {what} {value!r}: use 1-63 letters, digits, '.', '_' or '-'")
    return value


class QuotaConfig(BaseModel):
    """A team's share of one GPU type, in GPUs."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    nominal: Gpus = Field(description="GPUs the team is guaranteed")
    borrowing_limit: Gpus | None = Field(
        default=None, description="GPUs it may borrow beyond nominal from idle quota (None: no limit)"
    )
    lending_limit: Gpus | None = Field(
        default=None, description="of its unused nominal, GPUs others may borrow (None: all of it)"
    )


class TeamConfig(BaseModel):
    """One team: its place in the tree, its members and its quotas per GPU type."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    parent: str | None = Field(default=None, description="the parent team; none: directly under the organisation")
    members: list[str] = Field(default_factory=list, description="user names")
    quotas: dict[str, QuotaConfig] = Field(default_factory=dict, description="per GPU type")

    @field_validator("quotas")
    @classmethod
    def _gpu_types(cls, value: dict[str, QuotaConfig]) -> dict[str, QuotaConfig]:
        for gpu_type in value:
            if not gpu_type.strip() or gpu_type != gpu_type.strip():
                raise ValueError(f"GPU type {gpu_type!r}: give a type name such as H100, without spaces around it")
            if not is_gpu_type(gpu_type):
                raise ValueError(f"bad GPU type {gpu_type!r}: {GPU_TYPE_RULE}")
        return value

    @field_validator("members")
    @classmethod
    def _members(cls, value: list[str]) -> list[str]:
        for user in value:
            if not is_user_name(user):
                raise ValueError(f"bad user name {user!r}: use {USER_NAME_RULE}")
        if len(set(value)) != len(value):
            raise ValueError("lists a user twice")
        return value


class PriorityClassConfig(BaseModel):
    """A named priority: higher values run first; preemptible jobs may be stopped for higher ones."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    value: Annotated[int, BeforeValidator(_priority)] = Field(
        strict=True, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="the priority of the class's jobs"
    )
    preemptible: Flag = Field(default=False, description="its jobs may be stopped for higher-priority ones")


class QueueConfig(BaseModel):
    """Defaults for jobs submitted to a queue."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    time_limit_s: Annotated[float | None, BeforeValidator(_duration)] = Field(
        default=None, alias="time_limit", description="default wall-clock limit, e.g. 24h"
    )
    priority_class: str | None = Field(default=None, description="default priority class")


class FairShareConfig(BaseModel):
    """How past usage lowers a team's priority: usage decays with ``half_life``; weights scale shares."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    half_life_s: Annotated[float, BeforeValidator(_duration)] = Field(
        default=DEFAULT_HALF_LIFE_S, alias="half_life", description="usage half-life, e.g. 7d"
    )
    weights: dict[
        str,
        Annotated[
            float,
            BeforeValidator(_number(f"a weight above 0 and at most {MAX_WEIGHT:,.0f}, such as 2", MAX_WEIGHT)),
            Field(strict=True, gt=0, le=MAX_WEIGHT),
        ],
    ] = Field(default_factory=dict, description="per team, above 0; 1.0 when not listed")


class ClusterConfig(BaseModel):
    """The cluster's scheduling configuration (``corral head --config corral.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    organisation: str = Field(default="org", description="the root of the team tree")
    teams: dict[str, TeamConfig] = Field(default_factory=dict, description="by name")
    priority_classes: dict[str, PriorityClassConfig] = Field(default_factory=dict, description="by name")
    default_priority_class: str | None = Field(default=None, description="for jobs that name none")
    queues: dict[str, QueueConfig] = Field(default_factory=dict, description="per-queue defaults, by name")
    fair_share: FairShareConfig = Field(default_factory=FairShareConfig)
    gpu_speed: dict[str, GpuSpeed] = Field(
        default_factory=dict, description="run-time speed per GPU type (default 1.0), e.g. {H100: 1.0, L4: 0.2}"
    )

    @field_validator("gpu_speed")
    @classmethod
    def _speeds(cls, value: dict[str, float]) -> dict[str, float]:
        return check_gpu_speeds(value)

    @model_validator(mode="after")
    def _parent_named_as_the_organisation(self) -> ClusterConfig:
        """``parent: ORGANISATION`` says what no parent says: the team sits directly under the organisation."""
        if any(team.parent == self.organisation for team in self.teams.values()):
            teams = {
                name: team.model_copy(update={"parent": None}) if team.parent == self.organisation else team
                for name, team in self.teams.items()
            }
            object.__setattr__(self, "teams", teams)
        return self

    @field_validator("organisation")
    @classmethod
    def _organisation(cls, value: str) -> str:
        return _check_name(value, "organisation name")

    @field_validator("teams", "priority_classes", "queues")
    @classmethod
    def _names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            _check_name(name, "name")
        return value

    def team_of(self, user: str) -> str | None:
        """The team a user belongs to, or None."""
        return next((name for name, team in self.teams.items() if user in team.members), None)

    def ancestors(self, team: str) -> list[str]:
        """The team's parents, nearest first, ending at the organisation."""
        chain: list[str] = []
        parent = self.teams[team].parent
        while parent is not None:
            chain.append(parent)
            parent = self.teams[parent].parent
        return [*chain, self.organisation]


def cross_check(config: ClusterConfig) -> list[FieldError]:
    """Problems that span fields; empty when the config is consistent."""
    errors: list[FieldError] = []
    teams = config.teams
    member_of: dict[str, str] = {}
    for name, team in teams.items():
        path = f"teams.{name}"
        if team.parent is not None and team.parent not in teams:
            known = ", ".join(sorted(teams)) or "none"
            errors.append(FieldError(f"{path}.parent", f"unknown team {team.parent!r} (teams: {known})"))
        elif _in_cycle(config, name):
            errors.append(FieldError(f"{path}.parent", f"the parent chain of {name} loops back on itself"))
        if name == config.organisation:
            errors.append(FieldError(path, f"{name!r} is the organisation's name"))
        for index, user in enumerate(team.members):
            if user in member_of:
                errors.append(FieldError(f"{path}.members[{index}]", f"{user} is already in team {member_of[user]}"))
            else:
                member_of[user] = name
        for gpu_type, quota in team.quotas.items():
            if quota.lending_limit is not None and quota.lending_limit > quota.nominal:
                errors.append(
                    FieldError(
                        f"{path}.quotas.{gpu_type}.lending_limit",
                        f"must not exceed nominal ({quota.nominal:g}), got {quota.lending_limit:g}",
                    )
                )
    errors.extend(_nominal_sums(config))
    classes = config.priority_classes
    known_classes = ", ".join(sorted(classes)) or "none defined"
    if config.default_priority_class is not None and config.default_priority_class not in classes:
        errors.append(
            FieldError(
                "default_priority_class",
                f"unknown priority class {config.default_priority_class!r} (classes: {known_classes})",
            )
        )
    for name, queue in config.queues.items():
        if queue.priority_class is not None and queue.priority_class not in classes:
            errors.append(
                FieldError(
                    f"queues.{name}.priority_class",
                    f"unknown priority class {queue.priority_class!r} (classes: {known_classes})",
                )
            )
    for weighted in config.fair_share.weights:
        if weighted not in teams and weighted != config.organisation:
            errors.append(FieldError(f"fair_share.weights.{weighted}", f"unknown team {weighted!r}"))
    return errors


def _nominal_sums(config: ClusterConfig) -> list[FieldError]:
    """A parent team's nominal quota of a GPU type must hold its child teams' nominal quotas of it
    (a child with no quota of that type counts its own children's)."""
    teams = config.teams
    children: dict[str, list[str]] = {}
    for name, team in teams.items():
        if team.parent in teams and not _in_cycle(config, name):
            children.setdefault(team.parent, []).append(name)

    def nominal(name: str, gpu_type: str) -> float:
        quota = teams[name].quotas.get(gpu_type)
        return quota.nominal if quota is not None else sum(nominal(c, gpu_type) for c in children.get(name, ()))

    errors: list[FieldError] = []
    for name, team in teams.items():
        for gpu_type, quota in team.quotas.items():
            held = [(child, nominal(child, gpu_type)) for child in children.get(name, ())]
            total = sum(gpus for _, gpus in held)
            if total > quota.nominal + 1e-9:
                parts = " + ".join(f"{child} {gpus:g}" for child, gpus in held if gpus > 0)
                errors.append(
                    FieldError(
                        f"teams.{name}.quotas.{gpu_type}.nominal",
                        f"must hold its child teams' nominal quotas ({parts} = {total:g}), got {quota.nominal:g}",
                    )
                )
    return errors


def _in_cycle(config: ClusterConfig, start: str) -> bool:
    seen = {start}
    parent = config.teams[start].parent
    while parent is not None and parent in config.teams:
        if parent in seen:
            return True
        seen.add(parent)
        parent = config.teams[parent].parent
    return False


def parse_cluster_config(data: Any, source: str = "config file") -> ClusterConfig:
    """Validate a decoded config document; raise ``SpecError`` naming each bad field."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        kind = shown(data)
        raise SpecError([FieldError("", f"{source} must be a mapping of sections (teams, queues, ...), got {kind}")])
    try:
        config = ClusterConfig.model_validate(data)
    except ValidationError as exc:
        found = from_validation_error(exc, model=ClusterConfig)
        raise SpecError([*found.errors, *_cross_errors_besides(data, exc)]) from None
    errors = cross_check(config)
    if errors:
        raise SpecError(errors)
    return config


def _cross_errors_besides(data: dict[str, Any], exc: ValidationError) -> list[FieldError]:
    """The cross-field problems of the rest of a config whose fields ``exc`` refused, so that one run
    reports both kinds: the refused values are left out and the rest is checked (when it validates)."""
    pruned, failed = copy.deepcopy(data), exc
    for _ in range(4):  # leaving a value out may leave its parent short of a required field: then the parent
        for error in failed.errors(include_url=False):
            loc = tuple(error["loc"])
            _drop(pruned, loc[:-1] if error["type"] == "missing" else loc)
        pruned = _without_gone(pruned)
        try:
            rest = ClusterConfig.model_validate(pruned)
            break
        except ValidationError as again:
            failed = again
    else:
        return []
    refused = {field_path(tuple(e["loc"])) for e in exc.errors(include_url=False)}
    return [e for e in cross_check(rest) if not any(e.field.startswith(path) for path in refused if path)]


def _drop(data: Any, loc: tuple[int | str, ...]) -> None:
    """Remove the value at ``loc`` (as far down as it exists) from nested mappings and lists."""
    for depth, key in enumerate(loc):
        last = depth == len(loc) - 1
        if isinstance(data, dict) and key in data:
            if last:
                del data[key]
                return
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            if last:
                data[key] = _GONE  # removed afterwards: the other errors' indices stay right meanwhile
                return
            data = data[key]
        else:
            return


_GONE = object()


def _without_gone(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_gone(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_without_gone(v) for v in data if v is not _GONE]
    return data


def load_cluster_config_yaml(text: str, source: str = "config file") -> ClusterConfig:
    """Parse YAML text into a ClusterConfig."""
    return parse_cluster_config(load_yaml_document(text, source), source)
