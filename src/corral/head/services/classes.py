"""A submitted job under the cluster config: its queue's defaults, its priority class, its team."""

from __future__ import annotations

from corral.head.security import Principal
from corral.head.services.common import Infeasible
from corral.spec import ClusterConfig, JobSpec

DEFAULT_TEAM = "default"


def resolve(spec: JobSpec, who: Principal, config: ClusterConfig, prefix: str = "") -> JobSpec:
    """The spec with what the config decides filled in; ``Infeasible`` names a bad queue or class."""
    update: dict[str, object] = {}
    queue = None
    if spec.queue is not None:
        queue = config.queues.get(spec.queue)
        if queue is None:
            known = ", ".join(sorted(config.queues)) or "none are configured"
            raise Infeasible(f"{prefix}queue", f"unknown queue {spec.queue!r} (queues: {known})")
        if spec.time_limit_s is None and queue.time_limit_s is not None:
            update["time_limit_s"] = queue.time_limit_s
    class_name = spec.priority_class or (queue.priority_class if queue else None) or config.default_priority_class
    if class_name is not None:
        chosen = config.priority_classes.get(class_name)
        if chosen is None:
            known = ", ".join(sorted(config.priority_classes)) or "none are configured"
            raise Infeasible(f"{prefix}priority_class", f"unknown priority class {class_name!r} (classes: {known})")
        if spec.priority != 0 and spec.priority != chosen.value:
            from_queue = queue is not None and queue.priority_class is not None
            raise Infeasible(f"{prefix}priority", _conflict(spec, class_name, chosen.value, config, from_queue))
        if chosen.preemptible and not spec.preemptible and "preemptible" in spec.model_fields_set:
            steady = ", ".join(sorted(n for n, c in config.priority_classes.items() if not c.preemptible)) or "none"
            raise Infeasible(
                f"{prefix}preemptible",
                f"this job's priority class {class_name!r} is preemptible; for a job that may not be preempted,"
                f" give a priority_class that is not (classes that are not: {steady})",
            )
        preemptible = spec.preemptible or chosen.preemptible  # a job may volunteer to be preempted
        update.update(priority_class=class_name, priority=chosen.value, preemptible=preemptible)
    if spec.team is None:
        update["team"] = config.team_of(who.user) or DEFAULT_TEAM
    return spec.model_copy(update=update) if update else spec


def _conflict(spec: JobSpec, class_name: str, value: int, config: ClusterConfig, from_queue: bool) -> str:
    """Why a job's own priority is refused: it differs from the value of the class it gets."""
    if spec.priority_class is not None:
        return f"priority {spec.priority} differs from priority_class {class_name}'s value {value}: give one of them"
    source = f"queue {spec.queue}" if from_queue else "the cluster's default_priority_class"
    known = ", ".join(f"{name} ({c.value})" for name, c in sorted(config.priority_classes.items()))
    return (
        f"priority {spec.priority} differs from the value {value} of priority class {class_name}, which this job"
        f" gets from {source}: leave priority out, or give priority_class: NAME instead (classes: {known})"
    )
