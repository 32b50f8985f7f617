"""Job, task and node states and the transitions between them."""

from __future__ import annotations

import signal
from enum import StrEnum


class JobState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_JOB_STATES


TERMINAL_JOB_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT})

# PENDING → RUNNING happens when every task of the gang runs; a placed job whose
# tasks are still starting stays PENDING (its reason says "starting").
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset(
        {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.PENDING}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.PENDING}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
    JobState.TIMEOUT: frozenset(),
}


class IllegalTransition(ValueError):
    """A state change the lifecycle does not allow (a bug or a stale report)."""


def check_job_transition(old: JobState, new: JobState) -> None:
    if new not in JOB_TRANSITIONS[old]:
        raise IllegalTransition(f"job cannot go from {old} to {new}")


class TaskState(StrEnum):
    """One node's share of a job, as the head sees it."""

    ASSIGNED = "ASSIGNED"  # placed; the agent has not reported it running yet
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"  # no longer wanted; the agent is terminating it
    EXITED = "EXITED"  # its processes are gone; exit code known
    LOST = "LOST"  # its node stopped answering or restarted without it

    @property
    def live(self) -> bool:
        """Whether its processes may still exist, so its GPUs are still held."""
        return self in (TaskState.ASSIGNED, TaskState.RUNNING, TaskState.STOPPING)


class NodeState(StrEnum):
    READY = "READY"
    NOT_READY = "NOT_READY"
    DRAINED = "DRAINED"


def describe_exit(status: int) -> str:
    """``"exit code 3"``, or ``"killed by signal SIGKILL"`` for a status of 128 + a signal's number (the
    shell's convention for a process a signal ended); a status above 128 that names no signal is an exit code."""
    if status > 128:
        try:
            return f"killed by signal {signal.Signals(status - 128).name}"
        except ValueError:
            pass
    return f"exit code {status}"
