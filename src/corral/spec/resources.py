"""ResourcesSpec: what a job or service asks of each node (GPUs, their types, CPUs, memory)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from corral.spec.names import is_gpu_type
from corral.spec.quantities import NUMBER_RE, parse_memory_mb
from corral.spec.strict import not_a_flag
from corral.spec.wording import first_repeat, shown, written

STORED = "stored"
"""Validation context key: the spec was accepted before, under rules that may since have become stricter."""


def _memory(value: Any) -> Any:
    if value is None:
        return None
    megabytes = parse_memory_mb(value)
    if megabytes == 0 and not (isinstance(value, int | float) and value == 0):
        raise ValueError(f"{value!r} is less than 1MB: give at least 1MB, e.g. 512MB or 4GB (or leave memory out)")
    return megabytes


MIN_GPU_FRACTION = 0.01
"""The smallest share of a GPU a job may ask for: its share of the SMs is a whole percent (CUDA MPS)."""
MAX_GPUS = 64
GPUS_HELP = f"a whole number from 0 to {MAX_GPUS} or a fraction from {MIN_GPU_FRACTION} to below 1"


class ResourcesSpec(BaseModel):
    """Resources per node (per task)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpus: float = Field(default=0, ge=0, le=MAX_GPUS, description="GPUs per node; a fraction below 1 shares one GPU")
    gpu_type: list[str] = Field(default_factory=list, description="acceptable GPU types, preferred first")
    cpus: float | None = Field(default=None, gt=0, le=4096, description="CPU cores per node to reserve")
    memory_mb: Annotated[int | None, BeforeValidator(_memory)] = Field(
        default=None, alias="memory", description="host memory per node to reserve, e.g. 64GB"
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"must be {GPUS_HELP}, not {str(value).lower()}")
        number = float(value) if isinstance(value, str) and NUMBER_RE.fullmatch(value.strip()) else value
        if not isinstance(number, int | float) or not 0 <= number <= MAX_GPUS:  # before pydantic's checks
            raise ValueError(f"must be {GPUS_HELP}, got {shown(value)}")
        return value

    @field_validator("gpus")
    @classmethod
    def _whole_or_fraction(cls, value: float) -> float:
        if (value >= 1 and not float(value).is_integer()) or 0 < value < MIN_GPU_FRACTION:
            raise ValueError(f"must be {GPUS_HELP}, got {shown(value)}")
        return value

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpus_not_bool(cls, value: Any) -> Any:
        return not_a_flag(value)

    @field_validator("gpu_type", mode="before")
    @classmethod
    def _type_list(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            names = [t.strip() for t in value.split(",")]
            if not all(names):
                where = "must not be empty" if not value.strip() else f"has an empty GPU type name in {value!r}"
                raise ValueError(f"{where}: give a type such as H100 or H100,A100 (or leave gpu_type out for any type)")
            return names
        if not isinstance(value, list):
            raise ValueError(
                f"expected a GPU type or a list of them, such as H100 or [H100, A100], got {written(value)}"
            )
        return value

    @field_validator("gpu_type")
    @classmethod
    def _type_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip():
                raise ValueError("has an empty GPU type name: give types such as [H100, A100] (or leave gpu_type out)")
            if not is_gpu_type(name):
                raise ValueError(f"bad GPU type {name!r}: expected a name such as H100 or A100")
        if (twice := first_repeat(value)) is not None:
            raise ValueError(f"lists {twice} twice: give each type once, preferred first (such as [H100, A100])")
        return value

    @field_validator("memory_mb")
    @classmethod
    def _some_memory(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value == 0 and not (info.context or {}).get(STORED):
            raise ValueError("is 0: give at least 1MB, e.g. 512MB or 4GB (or leave memory out to reserve none)")
        return value

    @model_validator(mode="after")
    def _types_need_gpus(self, info: ValidationInfo) -> ResourcesSpec:
        if self.gpu_type and self.gpus == 0 and not (info.context or {}).get(STORED):
            raise ValueError(
                f"gpu_type {', '.join(self.gpu_type)} is given, but gpus is 0 (a CPU-only job gets no GPU):"
                " give gpus, or leave gpu_type out"
            )
        return self
