"""User input: specs and quantity parsers. Errors name the field and what is valid."""

from corral.spec.cluster import ClusterSpec, NodeGroupSpec, load_cluster_yaml, parse_cluster_spec
from corral.spec.errors import FieldError, SpecError
from corral.spec.job import LAUNCHERS, JobSpec, ResourcesSpec, load_job_yaml, load_yaml_document, parse_job_spec
from corral.spec.quantities import (
    GpuGroup,
    parse_duration_s,
    parse_env_pair,
    parse_gpu_groups,
    parse_labels,
    parse_memory_mb,
)

__all__ = [
    "LAUNCHERS",
    "ClusterSpec",
    "FieldError",
    "GpuGroup",
    "JobSpec",
    "NodeGroupSpec",
    "ResourcesSpec",
    "SpecError",
    "load_cluster_yaml",
    "load_job_yaml",
    "load_yaml_document",
    "parse_cluster_spec",
    "parse_duration_s",
    "parse_env_pair",
    "parse_gpu_groups",
    "parse_job_spec",
    "parse_labels",
    "parse_memory_mb",
]
