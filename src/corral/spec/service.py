"""ServiceSpec: a ``kind: service`` file — replicas of one command behind the gateway."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from corral.spec.containers import Image, VolumeText
from corral.spec.errors import FieldError, SpecError, from_validation_error
from corral.spec.job import (
    CORRAL_SETS_ENV,
    MAX_PRIORITY,
    PRIORITY_HELP,
    JobSpec,
    command_value,
    reserved_env_problem,
)
from corral.spec.quantities import parse_duration_s, whole_number
from corral.spec.resources import STORED, ResourcesSpec
from corral.spec.strict import not_a_flag
from corral.spec.wording import shown, written
from corral.spec.yamldoc import SPEC_TEXT_KEYS, load_yaml_document

# Service names appear in URLs (/s/NAME/...) and in job names: keep them DNS-label-like.
_SERVICE_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
MAX_REPLICAS = 256


def _duration(value: Any) -> Any:
    return None if value is None else parse_duration_s(value)


def _whole(value: Any) -> Any:
    """A replica count as a whole number (``"2"``, ``1e0``); a boolean is left for the field to refuse."""
    return value if isinstance(value, bool) else whole_number(value)


def _text(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


Seconds = Annotated[float, BeforeValidator(_duration)]


class ReplicasSpec(BaseModel):
    """How many replicas the autoscaler may run; ``min: 0`` lets an idle service sleep."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    min: int = Field(default=1, ge=0, le=MAX_REPLICAS, description="replicas kept even when idle (0: scale to zero)")
    max: int = Field(default=1, ge=0, le=MAX_REPLICAS, description="replicas at most (0: stopped)")

    @model_validator(mode="before")
    @classmethod
    def _stopped_without_min(cls, data: Any) -> Any:
        """``max: 0`` alone stops the service: the default ``min`` of 1 does not apply then. Likewise a
        ``min`` alone above the default ``max`` of 1 runs exactly that many."""
        if isinstance(data, dict):  # whole numbers as the job spec reads them: "2", 1e0, 2.0
            data = {**data, **{k: _whole(data[k]) for k in ("min", "max") if k in data}}
        if isinstance(data, dict) and data.get("max") == 0 and "min" not in data:
            return {**data, "min": 0}
        if isinstance(data, dict) and "max" not in data and isinstance(data.get("min"), int):
            return {**data, "max": max(1, data["min"])} if not isinstance(data["min"], bool) else data
        return data

    @field_validator("min", "max", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return not_a_flag(value)

    @model_validator(mode="after")
    def _ordered(self) -> ReplicasSpec:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be at least min ({self.min})")
        return self


class ReadinessSpec(BaseModel):
    """How the gateway knows a replica can take requests."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    path: str = Field(default="/", description="HTTP path that answers 2xx once the replica is ready")
    timeout_s: Seconds = Field(default=1.0, alias="timeout", gt=0, le=60, description="how long one probe may take")
    hold_s: Seconds = Field(
        default=60.0,
        alias="hold",
        gt=0,
        le=3600,
        description="how long a request waits for a ready replica (e.g. after scale to zero) before a 503",
    )

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/") or any(c.isspace() for c in value):
            raise ValueError(f"must be an absolute URL path such as /health, got {value!r}")
        return value


class AutoscaleSpec(BaseModel):
    """What load one replica should carry; the autoscaler keeps replicas near it."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    target_inflight: float | None = Field(default=None, gt=0, description="requests in flight per replica")
    target_rps: float | None = Field(default=None, gt=0, description="requests per second per replica")
    up_delay_s: Seconds = Field(default=3.0, alias="up_delay", ge=0, le=3600, description="overload this long: add")
    down_delay_s: Seconds = Field(
        default=60.0, alias="down_delay", ge=0, le=86400, description="underload this long: remove"
    )

    @field_validator("target_inflight", "target_rps", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return not_a_flag(value)

    @model_validator(mode="after")
    def _one_target(self) -> AutoscaleSpec:
        if self.target_inflight is not None and self.target_rps is not None:
            raise ValueError("give one of target_inflight or target_rps, not both")
        return self


class ServiceSpec(BaseModel):
    """A service: ``command`` listens on ``$PORT``; each replica is a task scheduled like a job."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    name: str = Field(description="the service's name; its URL is HEAD/s/NAME/")
    command: str | list[str] = Field(description="a command that serves HTTP on $PORT")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    replicas: ReplicasSpec = Field(default_factory=ReplicasSpec)

    @field_validator("replicas", mode="before")
    @classmethod
    def _fixed_count(cls, value: Any) -> Any:
        """``replicas: 3`` is ``{min: 3, max: 3}``; anything else but a mapping is told the valid forms."""
        value = _whole(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return {"min": value, "max": value}
        if value is not None and not isinstance(value, dict | ReplicasSpec):
            raise ValueError(f"expected a number of replicas such as 2, or {{min: 1, max: 4}}, got {written(value)}")
        return value

    readiness: ReadinessSpec = Field(default_factory=ReadinessSpec)
    autoscale: AutoscaleSpec = Field(default_factory=AutoscaleSpec)
    team: str | None = Field(default=None, description="the team charged for the replicas")
    priority: int = Field(
        default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description=f"replicas' scheduling priority: {PRIORITY_HELP}"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    workdir: str | None = Field(default=None, description="working directory on the node")
    image: Image | None = Field(default=None, description="run each replica in this container image")
    volumes: list[VolumeText] = Field(
        default_factory=list, description="host directories mounted into the container: HOST:CONTAINER[:ro|rw]"
    )

    @field_validator("priority", mode="before")
    @classmethod
    def _whole_priority(cls, value: Any) -> Any:
        return whole_number(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _SERVICE_NAME_RE.match(value):
            raise ValueError(
                f"bad service name {value!r}: use 1-40 lowercase letters, digits or '-', "
                "starting and ending with a letter or digit"
            )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, value: Any) -> Any:
        """As a job's: ``[serve, --port, 8000]`` has a number in it, and ``command: 5`` is refused."""
        return command_value(value)

    @field_validator("env", mode="before")
    @classmethod
    def _scalars_as_text(cls, value: Any) -> Any:
        """YAML reads ``env: {N: 1}`` with numbers in it; the replica job spec then checks it as a job's."""
        if isinstance(value, dict):
            return {k: _text(v) if isinstance(v, bool | int | float) else v for k, v in value.items()}
        return value

    @field_validator("env")
    @classmethod
    def _port_is_chosen(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "PORT" in value:
            raise ValueError("must not set PORT: each replica's agent chooses a free port and passes it as $PORT")
        if "MASTER_PORT" in value and not (info.context or {}).get(STORED):
            # A job's MASTER_PORT is its fixed port, and a replica's $PORT is its MASTER_PORT: every
            # replica would ask for the same port, and a second one on a node could never listen.
            raise ValueError(
                "must not set MASTER_PORT: each replica's agent chooses a free port and passes it as $PORT "
                "(and $MASTER_PORT), so that replicas on one node do not collide"
            )
        for key in value:
            if (problem := reserved_env_problem(key)) is not None:
                raise ValueError(problem)
        return value

    def replica_job(self, revision: int) -> JobSpec:
        """The job spec of one replica: the service's command, resources and priority."""
        env = {**self.env, "CORRAL_SERVICE": self.name, "CORRAL_SERVICE_REVISION": str(revision)}
        return JobSpec.model_validate(
            {
                "name": f"{self.name}-r{revision}",
                "command": self.command,
                "resources": self.resources,
                "team": self.team,
                "priority": self.priority,
                "env": env,
                "workdir": self.workdir,
                "image": self.image,
                "volumes": self.volumes,
                "max_restarts": REPLICA_RESTARTS,
            },
            context={CORRAL_SETS_ENV: True},
        )


# A replica lost with its node or crashed starts again this many times before the service
# replaces it with a fresh one.
REPLICA_RESTARTS = 3


def parse_service_spec(data: Any, source: str = "service") -> ServiceSpec:
    """Validate a decoded service document; raise SpecError naming each bad field."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else shown(data)
        raise SpecError([FieldError("", f"{source} must be a mapping of fields (name, command, …), got {kind}")])
    if data.get("kind") not in (None, "service"):
        raise SpecError([FieldError("kind", f"expected 'service' for a service, got {data.get('kind')!r}")])
    body = {k: v for k, v in data.items() if k != "kind"}
    try:
        spec = ServiceSpec.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc, model=ServiceSpec) from None
    try:
        spec.replica_job(1)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    return spec


def load_service_yaml(text: str, source: str = "service file") -> ServiceSpec:
    return parse_service_spec(load_yaml_document(text, source, as_written=SPEC_TEXT_KEYS), source)
