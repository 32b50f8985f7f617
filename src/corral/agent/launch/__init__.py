"""Starting task processes and ending them, with every descendant they spawned."""

from corral.agent.launch.adopted import UNRECORDED_STATUS, AdoptedProcess, read_exit_file, recording_exit
from corral.agent.launch.process import (
    LaunchedProcess,
    LaunchError,
    ProcessSpec,
    TaskProcess,
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
from corral.model import describe_exit

__all__ = [
    "MARKER_ENV",
    "UNRECORDED_STATUS",
    "AdoptedProcess",
    "DescendantTracker",
    "LaunchError",
    "LaunchedProcess",
    "ProcInfo",
    "ProcKey",
    "ProcessSpec",
    "TaskProcess",
    "TerminationResult",
    "become_subreaper",
    "describe_exit",
    "exit_status",
    "find_task_processes",
    "is_subreaper",
    "kill_leftovers",
    "markers_with_prefix",
    "read_exit_file",
    "reap_orphans",
    "recording_exit",
    "running_pids",
    "start",
    "terminate_tree",
]
