"""JobSpec: what a user submits (a job file or ``corral run`` flags)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from corral.spec.arrays import ArraySpec, parse_array
from corral.spec.containers import Image, Volume, VolumeText, parse_volume
from corral.spec.errors import FieldError, SpecError, from_validation_error
from corral.spec.quantities import parse_duration_s, whole_number
from corral.spec.resources import STORED, ResourcesSpec
from corral.spec.strict import Flag
from corral.spec.wording import first_repeat, shown, written
from corral.spec.yamldoc import SPEC_TEXT_KEYS, load_yaml_document

Launcher = Literal["per-gpu", "per-node"]
LAUNCHERS: tuple[str, ...] = ("per-gpu", "per-node")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What exec accepts: one argument or environment string below 128 KiB (Linux's MAX_ARG_STRLEN, its NUL
# included), and all of them together well under ARG_MAX (2 MiB with the usual 8 MiB stack).
MAX_STRING_BYTES = 128 * 1024 - 1
MAX_TOTAL_BYTES = 1024 * 1024
_JOB_ID_RE = re.compile(r"^j-[a-z0-9]{1,30}$")
MAX_NODES = 4096
MAX_PRIORITY = 1_000_000
"""A job's priority is from -MAX_PRIORITY to MAX_PRIORITY: the range of a priority class's value too."""
PRIORITY_HELP = f"a whole number from {-MAX_PRIORITY:,} to {MAX_PRIORITY:,}"
# Validation context key: the spec is Corral's own (a service's replica), whose env may hold CORRAL_* variables.
CORRAL_SETS_ENV = "corral_sets_env"
# Variables Corral sets in every job's processes (besides CORRAL_*); a job's own value would be overridden.
# (MASTER_PORT is not among them: a job that sets it keeps it as its fixed rendezvous port.)
RESERVED_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
)


def reserved_env_problem(key: str) -> str | None:
    """Why a job or service may not set this variable itself (Corral sets it), or None."""
    if key in RESERVED_ENV or key.startswith("CORRAL_"):
        return f"{key} is set by Corral in every job (CORRAL_*, {', '.join(RESERVED_ENV)}): choose another name"
    return None


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _check_exec_sizes(texts: list[str], names: list[str], all_of: str, instead: str) -> None:
    """Refuse what exec would refuse (E2BIG) when the job starts: a string (``names`` gives each one's name)
    or a total too large."""
    sizes = [len(text.encode()) for text in texts]
    for name, size in zip(names, sizes, strict=True):
        if size > MAX_STRING_BYTES:
            raise ValueError(
                f"{name} is {size:,} bytes; a process accepts at most {MAX_STRING_BYTES:,} bytes per string: {instead}"
            )
    if (total := sum(sizes)) > MAX_TOTAL_BYTES:
        raise ValueError(f"{all_of} come to {total:,} bytes; at most {MAX_TOTAL_BYTES:,} in all: {instead}")


COMMAND_HELP = "a shell command line (a string) or a list of arguments (strings)"


def command_value(value: Any) -> Any:
    """A job's or service's command before its checks: text, or a list whose numbers and booleans become
    their text (YAML reads the 3 of ``[python, train.py, --epochs, 3]`` as a number). A number or boolean
    alone is refused: YAML read it as a value (``010`` as 8, ``yes`` as true), so its text may not be what
    was written."""
    if isinstance(value, bool | int | float):
        raise ValueError(
            f"must be {COMMAND_HELP}, got {written(value)}: YAML reads an unquoted number, true, false, yes or no"
            " as a value, not as text; quote the command to run it as written"
        )
    if isinstance(value, list):
        return [_env_text(v) if isinstance(v, bool | int | float) else v for v in value]
    if not isinstance(value, str):
        raise ValueError(f"must be {COMMAND_HELP}, got {shown(value)}")
    return value


def _duration(value: Any) -> Any:
    if value is None:
        return None
    return parse_duration_s(value)


MAX_GRACE_S = 86400


def _grace(value: Any) -> Any:
    """Like a duration, but 0 is allowed (SIGKILL right after SIGTERM), and at most a day: a number past
    that (``.inf``, ``1e9``, NaN) is refused with the field's own limit, not the ten years of other durations."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and not value < 0 and not value <= MAX_GRACE_S:  # NaN too; a negative one is refused below
        raise ValueError(f"must be a number at most {MAX_GRACE_S:,}, got {value}")
    seconds = parse_duration_s(value, allow_zero=True)
    if isinstance(value, str) and seconds > MAX_GRACE_S:  # say so with the text given, not its seconds
        raise ValueError(f"must be at most 1d ({MAX_GRACE_S:,} seconds), got {value!r}")
    return seconds


class TopologySpec(BaseModel):
    """Where a gang's nodes go: ``pack: rack`` (as few racks as fit, the default) or ``required: rack``
    (all in one rack, or wait). The value names a node label the agents report (``--labels rack=r1``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    pack: str | None = Field(default=None, description="node label to pack the gang by (preferred)")
    required: str | None = Field(default=None, description="node label all the gang's nodes must share")

    @field_validator("pack", "required")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}", value):
            raise ValueError(f"bad label name {value!r}: expected a node label such as rack or block")
        return value

    @property
    def label(self) -> str:
        return self.required or self.pack or "rack"


class JobSpec(BaseModel):
    """A batch job: one task per node, all nodes started together (a gang)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    name: str | None = Field(default=None, description="a short name; defaults to the command's first word")
    command: str | list[str] = Field(description="a shell command line, or an argv list run without a shell")
    nodes: int = Field(default=1, ge=1, le=MAX_NODES, description="nodes in the gang")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    launcher: Launcher = Field(default="per-node", description="per-node: one process per node; per-gpu: one per GPU")
    topology: TopologySpec = Field(
        default_factory=TopologySpec, description="gang placement: {pack: rack} (default) or {required: rack}"
    )
    team: str | None = Field(default=None, description="the team charged for the job")
    priority: int = Field(
        default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY, description=f"higher runs first: {PRIORITY_HELP}"
    )
    priority_class: str | None = Field(
        default=None, description="a priority class of the cluster config (sets priority and preemptible)"
    )
    queue: str | None = Field(default=None, description="a queue of the cluster config (its defaults apply)")
    time_limit_s: Annotated[float | None, BeforeValidator(_duration)] = Field(
        default=None, alias="time_limit", description="wall-clock limit, e.g. 2h"
    )
    max_restarts: int = Field(default=0, ge=0, le=1000, description="requeues allowed after failure or node loss")
    preemptible: Flag = Field(
        default=False, description="once running, may be stopped (and requeued) for a higher-priority job"
    )
    grace_period_s: Annotated[float | None, BeforeValidator(_grace)] = Field(
        default=None,
        alias="grace_period",
        le=MAX_GRACE_S,
        description="time between SIGTERM and SIGKILL when the job is stopped, e.g. 30s (default: the head's)",
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    array: str | None = Field(
        default=None, description="run one job per index: 0-99, 1,3,5-7, or 0-99%8 for at most 8 at once"
    )
    after_ok: list[str] = Field(default_factory=list, description="start only after these jobs all SUCCEEDED")
    after_any: list[str] = Field(default_factory=list, description="start only after these jobs all ended")
    workdir: str | None = Field(default=None, description="working directory on the node (default: a task directory)")
    image: Image | None = Field(default=None, description="run the command in this container image")
    volumes: list[VolumeText] = Field(
        default_factory=list, description="host directories mounted into the container: HOST:CONTAINER[:ro|rw]"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME_RE.match(value):
            raise ValueError(
                f"bad name {value!r}: use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("command", mode="before")
    @classmethod
    def _command_scalars(cls, value: Any) -> Any:
        return command_value(value)

    @field_validator("command", "workdir")
    @classmethod
    def _no_nul(cls, value: str | list[str] | None) -> str | list[str] | None:
        """A NUL character cannot reach a process: exec takes C strings."""
        if any("\x00" in part for part in ([value] if isinstance(value, str) else value or [])):
            raise ValueError("must not contain a NUL character (\\x00)")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty: give a shell command line or a list of arguments")
        if isinstance(value, list) and not value:
            raise ValueError("must not be empty: give a shell command line or a list of arguments")
        if not (info.context or {}).get(STORED):
            parts = [value] if isinstance(value, str) else value
            names = ["the command line"] if isinstance(value, str) else [f"argument {i}" for i in range(len(value))]
            _check_exec_sizes(parts, names, "the arguments", "put it in a script")
        return value

    @field_validator("volumes", mode="before")
    @classmethod
    def _volume_list(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("must be a list of HOST:CONTAINER[:ro|rw] strings, e.g. [/data:/data:ro]")
        return value

    @field_validator("volumes")
    @classmethod
    def _volumes_need_an_image(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if value and info.data.get("image", "") is None:  # absent key: the image itself was refused
            raise ValueError("mounts into a container: give image too (volumes apply only to a job with an image)")
        return value

    @property
    def mounts(self) -> list[Volume]:
        return [parse_volume(v) for v in self.volumes]

    @field_validator("array", mode="before")
    @classmethod
    def _array_text(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # one index, which YAML reads as a number
        if value is not None and not isinstance(value, str):
            raise ValueError(f"expected indices as text, such as 0-99, 1,3,5-7 or 0-99%8, got {written(value)}")
        return value

    @field_validator("after_ok", "after_any", mode="before")
    @classmethod
    def _one_or_more_ids(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]  # one job, given without a list
        if value is not None and not isinstance(value, list):
            raise ValueError(f"expected a job id or a list of them, such as [j-3fk2a9qz], got {written(value)}")
        return value

    @field_validator("array")
    @classmethod
    def _array(cls, value: str | None) -> str | None:
        if value is not None:
            parse_array(value)
        return value

    @field_validator("after_ok", "after_any")
    @classmethod
    def _job_ids(cls, value: list[str]) -> list[str]:
        for job_id in value:
            if not _JOB_ID_RE.match(job_id):
                raise ValueError(f"bad job id {job_id!r}: expected an id such as j-3fk2a9qz")
        if (twice := first_repeat(value)) is not None:
            raise ValueError(f"lists {twice} twice: give each job once")
        return value

    @field_validator("topology", mode="after")
    @classmethod
    def _one_topology(cls, value: TopologySpec) -> TopologySpec:
        if value.pack is not None and value.required is not None:
            raise ValueError("give pack or required, not both")
        return value

    @property
    def array_spec(self) -> ArraySpec | None:
        return None if self.array is None else parse_array(self.array)

    @field_validator("team")
    @classmethod
    def _team(cls, value: str | None) -> str | None:
        if value is not None and not _NAME_RE.match(value):
            raise ValueError(f"bad team {value!r}: use letters, digits, '.', '_' or '-'")
        return value

    @field_validator("nodes", "priority", "max_restarts", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        return whole_number(value)

    @field_validator("env", mode="before")
    @classmethod
    def _env_values(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        empty = [k for k, v in value.items() if v is None]
        if empty:
            raise ValueError(f'{empty[0]} has no value; write {empty[0]}: "" for an empty string')
        odd = [k for k, v in value.items() if not isinstance(v, str | int | float | bool)]
        if odd:  # a list, a mapping, or what YAML reads as a date or binary: quoting keeps it as written
            kind = type(value[odd[0]]).__name__
            raise ValueError(f"{odd[0]} must be a string, number or boolean, not a {kind} (quote the value)")
        return {
            k: (str(v).lower() if isinstance(v, bool) else v if isinstance(v, str) else str(v))
            for k, v in value.items()
        }

    @field_validator("env")
    @classmethod
    def _env_keys(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for key, text in value.items():
            if "\x00" in text:
                raise ValueError(f"{key} must not contain a NUL character (\\x00)")
        for key in value:
            if not _ENV_KEY_RE.match(key):
                raise ValueError(f"bad variable name {key!r}: use letters, digits and '_', not starting with a digit")
        if not (info.context or {}).get(STORED):
            entries = [f"{key}={text}" for key, text in value.items()]
            _check_exec_sizes(entries, list(value), "the variables", "pass large data in a file")
        port = value.get("MASTER_PORT")
        if port is not None and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"MASTER_PORT must be a port number from 1 to 65535, got {port!r}")
        if not (info.context or {}).get(CORRAL_SETS_ENV):
            for key in value:
                if (problem := reserved_env_problem(key)) is not None:
                    raise ValueError(problem)
        return value

    @property
    def display_name(self) -> str:
        if self.name:
            return self.name
        first = self.command.split()[0] if isinstance(self.command, str) else self.command[0]
        base = first.rsplit("/", 1)[-1]
        cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "-", base).strip("-.") or "job"
        return cleaned[:63]

    @property
    def gpus_per_node(self) -> float:
        return self.resources.gpus

    @property
    def whole_gpus_per_node(self) -> int:
        """GPU slots per node: a fraction still occupies (part of) one slot."""
        return math.ceil(self.resources.gpus)


def parse_job_spec(data: Any, source: str = "job") -> JobSpec:
    """Validate a decoded job document; raise SpecError naming each bad field."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else shown(data)
        raise SpecError(
            [FieldError("", f"{source} must be a mapping of fields (name, command, resources, …), got {kind}")]
        )
    if data.get("kind") not in (None, "job"):
        raise SpecError([FieldError("kind", f"expected 'job' for a batch job, got {data.get('kind')!r}")])
    body = {k: v for k, v in data.items() if k != "kind"}
    try:
        return JobSpec.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc, model=JobSpec) from None


def load_job_yaml(text: str, source: str = "job file") -> JobSpec:
    """Parse YAML text into a JobSpec."""
    return parse_job_spec(load_yaml_document(text, source, as_written=SPEC_TEXT_KEYS), source)
