"""User input: specs and quantity parsers. Errors name the field and what is valid."""

from corral.spec.cluster import ClusterSpec, NodeGroupSpec, load_cluster_yaml, parse_cluster_spec
from corral.spec.config import (
    ClusterConfig,
    FairShareConfig,
    PriorityClassConfig,
    QueueConfig,
    QuotaConfig,
    TeamConfig,
    load_cluster_config_yaml,
    parse_cluster_config,
)
from corral.spec.errors import FieldError, SpecError
from corral.spec.job import LAUNCHERS, JobSpec, load_job_yaml, parse_job_spec
from corral.spec.quantities import (
    GpuGroup,
    parse_duration_s,
    parse_env_pair,
    parse_gpu_groups,
    parse_labels,
    parse_memory_mb,
)
from corral.spec.resources import ResourcesSpec
from corral.spec.yamldoc import SPEC_TEXT_KEYS, load_yaml_document

__all__ = [
    "LAUNCHERS",
    "SPEC_TEXT_KEYS",
    "ClusterConfig",
    "ClusterSpec",
    "FairShareConfig",
    "FieldError",
    "GpuGroup",
    "JobSpec",
    "NodeGroupSpec",
    "PriorityClassConfig",
    "QueueConfig",
    "QuotaConfig",
    "ResourcesSpec",
    "SpecError",
    "TeamConfig",
    "load_cluster_config_yaml",
    "load_cluster_yaml",
    "load_job_yaml",
    "load_yaml_document",
    "parse_cluster_config",
    "parse_cluster_spec",
    "parse_duration_s",
    "parse_env_pair",
    "parse_gpu_groups",
    "parse_job_spec",
    "parse_labels",
    "parse_memory_mb",
]
