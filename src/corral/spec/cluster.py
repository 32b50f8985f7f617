"""ClusterSpec: the simulator's cluster file (node groups and GPU speeds)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from corral.spec.config import GpuSpeed
from corral.spec.errors import FieldError, SpecError, from_validation_error
from corral.spec.names import is_gpu_type
from corral.spec.quantities import check_gpu_speeds, parse_memory_mb
from corral.spec.strict import not_a_flag
from corral.spec.wording import shown
from corral.spec.yamldoc import load_yaml_document

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9\-]{0,39}$")


def _memory(value: Any) -> Any:
    if value is None:
        return None
    return parse_memory_mb(value)


def _default_name(gpu_type: str) -> str:
    return re.sub(r"[^a-z0-9\-]+", "-", gpu_type.lower()).strip("-")[:40] or "group"


class NodeGroupSpec(BaseModel):
    """``count`` identical nodes; the GPU type, memory, layout, price and power of each."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True)

    name: str | None = Field(
        default=None, description="node name prefix; defaults to the GPU type in lower case (then -2, -3, … if taken)"
    )
    count: int = Field(ge=1, le=100_000, description="nodes in the group")
    gpus_per_node: int = Field(ge=1, le=64, description="GPUs on each node")
    gpu_type: str = Field(description="GPU model name, e.g. V100")
    gpu_memory_mb: Annotated[int | None, BeforeValidator(_memory)] = Field(
        default=None, alias="gpu_memory", description="memory of each GPU, e.g. 32GB"
    )
    nodes_per_rack: int | None = Field(default=None, ge=1, description="nodes per rack (label rack=...)")
    racks_per_block: int | None = Field(
        default=None, ge=1, le=100_000, description="racks per block (label block=...); needs nodes_per_rack"
    )
    price_per_gpu_hour: float | None = Field(default=None, ge=0, description="cost of one GPU for one hour")
    watts_busy: float | None = Field(default=None, ge=0, description="power of one busy GPU")
    watts_idle: float | None = Field(default=None, ge=0, description="power of one idle GPU")

    @field_validator(
        "count",
        "gpus_per_node",
        "nodes_per_rack",
        "racks_per_block",
        "price_per_gpu_hour",
        "watts_busy",
        "watts_idle",
        mode="before",
    )
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"must be a number, not {str(value).lower()}")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME_RE.match(value):
            raise ValueError(f"bad name {value!r}: use 1-40 lower-case letters, digits or '-'")
        return value

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, value: str) -> str:
        if not is_gpu_type(value):
            raise ValueError(f"bad GPU type {value!r}: expected a name such as V100 or H100")
        return value

    @model_validator(mode="after")
    def _blocks_of_racks(self) -> NodeGroupSpec:
        if self.racks_per_block is not None and self.nodes_per_rack is None:
            raise ValueError("racks_per_block needs nodes_per_rack: a block is made of racks")
        return self

    @property
    def group_name(self) -> str:
        """The node name prefix: ``name``, or the GPU type in lower case."""
        return self.name or _default_name(self.gpu_type)


class ClusterSpec(BaseModel):
    """A simulated cluster: node groups, and how fast each GPU type runs the traced jobs."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    node_groups: list[NodeGroupSpec] = Field(min_length=1, description="groups of identical nodes")
    gpu_speed: dict[str, GpuSpeed] = Field(
        default_factory=dict, description="run-time speed-up per GPU type (default 1.0): run time = duration / speed"
    )
    cross_rack_slowdown: float = Field(
        default=1.0,
        ge=1.0,
        le=100.0,
        description="a gang whose nodes are in more than one rack runs this many times longer (1: no penalty)",
    )

    @field_validator("cross_rack_slowdown", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        return not_a_flag(value)

    @field_validator("gpu_speed")
    @classmethod
    def _speeds(cls, value: dict[str, float]) -> dict[str, float]:
        return check_gpu_speeds(value)

    @model_validator(mode="after")
    def _one_spelling_per_type(self) -> ClusterSpec:
        """GPU types match without regard to case, as everywhere in the simulator: groups whose types differ
        only in case (``V100``, ``v100``) are one type, spelled as the first of them spells it."""
        spelling: dict[str, str] = {}
        groups = [
            group
            if spelling.setdefault(group.gpu_type.lower(), group.gpu_type) == group.gpu_type
            else group.model_copy(update={"gpu_type": spelling[group.gpu_type.lower()]})
            for group in self.node_groups
        ]
        if groups != self.node_groups:
            object.__setattr__(self, "node_groups", groups)  # frozen; as built by __init__ too
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> ClusterSpec:
        """Given names must differ; a group without one takes its GPU type's name, with ``-2``, ``-3``, … after
        it where a group before it (or a given name) already has that name."""
        seen: dict[str, int] = {}
        for index, group in enumerate(self.node_groups):
            if group.name is None:
                continue
            if group.name in seen:
                where = f"node_groups[{index}].name"
                raise ValueError(f"{where}: {group.name!r} is already the name of node_groups[{seen[group.name]}]")
            seen[group.name] = index
        groups = list(self.node_groups)
        for index, group in enumerate(groups):
            if group.name is not None:
                continue
            base = name = group.group_name
            suffix = 1
            while name in seen:
                suffix += 1
                name = f"{base[: 40 - len(str(suffix)) - 1]}-{suffix}"
            seen[name] = index
            if name != base:
                groups[index] = group.model_copy(update={"name": name})
        return self if groups == self.node_groups else self.model_copy(update={"node_groups": groups})

    @model_validator(mode="after")
    def _speeds_spelled_as_the_groups(self) -> ClusterSpec:
        """GPU types match without regard to case, as everywhere in the simulator: a ``gpu_speed`` key takes
        the spelling of the node groups' type it names."""
        spelling = {g.gpu_type.lower(): g.gpu_type for g in self.node_groups}
        speeds: dict[str, float] = {}
        for key, speed in self.gpu_speed.items():
            name = spelling.get(key.lower(), key)
            if name in speeds:
                raise ValueError(f"gpu_speed: {key!r} names {name!r} again (GPU types match whatever their case)")
            speeds[name] = speed
        return self if speeds == self.gpu_speed else self.model_copy(update={"gpu_speed": speeds})

    def speed(self, gpu_type: str) -> float:
        """The run-time speed-up of a GPU type (1.0 when not listed)."""
        return self.gpu_speed.get(gpu_type, 1.0)

    @property
    def total_gpus(self) -> int:
        return sum(g.count * g.gpus_per_node for g in self.node_groups)


def parse_cluster_spec(data: Any, source: str = "cluster file") -> ClusterSpec:
    """Validate a decoded cluster document; raise SpecError naming each bad field."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else shown(data)
        raise SpecError([FieldError("", f"{source} must be a mapping with node_groups, got {kind}")])
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, model=ClusterSpec) from None


def load_cluster_yaml(text: str, source: str = "cluster file") -> ClusterSpec:
    """Parse YAML text into a ClusterSpec."""
    return parse_cluster_spec(load_yaml_document(text, source), source)
