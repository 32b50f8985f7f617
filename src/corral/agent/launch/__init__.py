"""Starting task processes and ending them, with every descendant they spawned."""

from corral.agent.launch.process import (
    LaunchedProcess,
    LaunchError,
    ProcessSpec,
    describe_exit,
    exit_status,
    running_pids,
    start,
)
from corral.agent.launch.procfs import MARKER_ENV, ProcInfo, ProcKey, markers_with_prefix
from corral.agent.launch.reaper import become_subreaper, is_subreaper, reap_orphans
from corral.agent.launch.tree import (
    DescendantTracker,
    TerminationResult,
    find_task_processes,
    kill_leftovers,
    terminate_tree,
)

__all__ = [
    "MARKER_ENV",
    "DescendantTracker",
    "LaunchError",
    "LaunchedProcess",
    "ProcInfo",
    "ProcKey",
    "ProcessSpec",
    "TerminationResult",
    "become_subreaper",
    "describe_exit",
    "exit_status",
    "find_task_processes",
    "is_subreaper",
    "kill_leftovers",
    "markers_with_prefix",
    "reap_orphans",
    "running_pids",
    "start",
    "terminate_tree",
]
