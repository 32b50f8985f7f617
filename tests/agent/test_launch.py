"""Starting task processes and ending whole process trees, with real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.agent.launch import (
    MARKER_ENV,
    DescendantTracker,
    LaunchedProcess,
    LaunchError,
    ProcessSpec,
    describe_exit,
    find_task_processes,
    kill_leftovers,
    running_pids,
    start,
    terminate_tree,
)

pytestmark = pytest.mark.timeout(20)

PY = sys.executable
BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

# A child that leaves the session (setsid), and a daemonized grandchild (fork, setsid, fork) that
# ignores SIGTERM and is reparented away from the tree; both record their pid.
ESCAPE = """
import os, signal, time
def record(name):
    with open(name, "w") as f:
        f.write(str(os.getpid()))
if os.fork() == 0:
    os.setsid()
    record("setsid.pid")
    time.sleep(300)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        record("orphan.pid")
        time.sleep(300)
    os._exit(0)
os.wait()
time.sleep(300)
"""

# With a cleared environment: fork a grandchild into its own session, then exit once told to.
HIDE = """
import os, time
if os.fork() == 0:
    os.setsid()
    with open("hidden.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(300)
    os._exit(0)
while not os.path.exists("release"):
    time.sleep(0.02)
"""


def marked_pids(marker: str) -> set[int]:
    """Live processes whose environment carries the marker, by reading /proc directly."""
    needle = f"{MARKER_ENV}={marker}".encode()
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(int(name)):
            found.add(int(name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def kill_quietly(pids: set[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def marker() -> Iterator[str]:
    value = f"test-{uuid.uuid4().hex}"
    yield value
    kill_quietly(marked_pids(value))


def make_spec(tmp_path: Path, command: str | list[str], marker: str, **env: str) -> ProcessSpec:
    return ProcessSpec(
        command=command, env={**BASE_ENV, **env}, cwd=tmp_path, log_path=tmp_path / "logs" / "out.log", marker=marker
    )


async def wait_for_file(path: Path, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).strip():
            return text
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} did not appear")


async def finish(proc: LaunchedProcess, timeout: float = 5.0) -> int:
    return await asyncio.wait_for(proc.wait(), timeout)


def test_shell_command_logs_both_streams_and_reports_exit_codes(tmp_path: Path, marker: str) -> None:
    async def main() -> tuple[int, int]:
        failing = await start(make_spec(tmp_path, "echo out; echo err >&2; exit 3", marker))
        first = await finish(failing)
        ok = await start(make_spec(tmp_path, "echo again", marker))
        return first, await finish(ok)

    assert asyncio.run(main()) == (3, 0)
    assert (tmp_path / "logs" / "out.log").read_text() == "out\nerr\nagain\n"


def test_argv_runs_without_shell_with_exact_env_and_cwd(tmp_path: Path, marker: str) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()

    async def main() -> list[int]:
        codes = []
        for argv in (["/usr/bin/env"], ["/bin/pwd"], ["/bin/echo", "$HOME; exit 7"]):
            proc = await start(ProcessSpec(argv, {"ONLY": "this"}, workdir, tmp_path / "out.log", marker))
            codes.append(await finish(proc))
        return codes

    assert asyncio.run(main()) == [0, 0, 0]
    lines = (tmp_path / "out.log").read_text().splitlines()
    assert lines == ["ONLY=this", f"{MARKER_ENV}={marker}", str(workdir), "$HOME; exit 7"]


def test_start_failures_raise_launch_error(tmp_path: Path, marker: str) -> None:
    async def main() -> None:
        with pytest.raises(LaunchError, match="no-such-binary"):
            await start(make_spec(tmp_path, ["/nonexistent/no-such-binary"], marker))
        with pytest.raises(LaunchError):
            await start(ProcessSpec(["/bin/true"], BASE_ENV, tmp_path / "missing", tmp_path / "out.log", marker))
        with pytest.raises(LaunchError, match="empty command"):
            await start(make_spec(tmp_path, [], marker))

    asyncio.run(main())


def test_a_command_too_long_to_start_is_named_shortly(tmp_path: Path, marker: str) -> None:
    async def main() -> str:
        with pytest.raises(LaunchError) as info:  # one argument past the kernel's limit: E2BIG
            await start(make_spec(tmp_path, ["/bin/echo", "x" * 300_000], marker))
        return str(info.value)

    message = asyncio.run(main())
    assert "Argument list too long" in message
    assert len(message) < 1_000 and "characters)" in message


def test_signal_death_reports_128_plus_signal(tmp_path: Path, marker: str) -> None:
    async def main() -> list[int]:
        statuses = []
        for sig in (signal.SIGKILL, signal.SIGTERM):
            proc = await start(make_spec(tmp_path, ["sleep", "30"], marker))
            assert proc.returncode is None
            os.kill(proc.pid, sig)
            statuses.append(await finish(proc))
            assert proc.returncode == statuses[-1]
        return statuses

    assert asyncio.run(main()) == [137, 143]
    assert describe_exit(137) == "killed by signal SIGKILL"
    assert describe_exit(143) == "killed by signal SIGTERM"
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(0) == "exit code 0"


def test_terminate_tree_kills_children_that_ignore_sigterm(tmp_path: Path, marker: str) -> None:
    command = "trap '' TERM; sleep 300 & echo $! > child.pid; wait"

    async def main() -> None:
        proc = await start(make_spec(tmp_path, command, marker))
        child = int(await wait_for_file(tmp_path / "child.pid"))
        began = time.monotonic()
        result = await terminate_tree([proc], marker, grace_s=0.5)
        elapsed = time.monotonic() - began
        assert await finish(proc) == 137
        assert 0.5 <= elapsed < 3.0
        assert result.signalled >= 2
        assert result.killed >= 2
        assert result.clean
        assert not alive(child)

    asyncio.run(main())
    assert marked_pids(marker) == set()


def test_terminate_tree_finds_setsid_and_double_forked_grandchildren(tmp_path: Path, marker: str) -> None:
    async def main() -> set[int]:
        proc = await start(make_spec(tmp_path, [PY, "-c", ESCAPE], marker))
        escaped = {int(await wait_for_file(tmp_path / name)) for name in ("setsid.pid", "orphan.pid")}
        assert escaped <= marked_pids(marker)
        result = await terminate_tree([proc], marker, grace_s=0.5)
        assert await finish(proc) == 143
        assert result.clean
        assert result.killed == 1
        return escaped

    escaped = asyncio.run(main())
    assert not any(alive(pid) for pid in escaped)
    assert marked_pids(marker) == set()


def test_tracker_finds_escaped_process_with_cleared_environment(tmp_path: Path, marker: str) -> None:
    command = f"env -i {PY} -c '{HIDE}' & wait"

    async def main() -> int:
        proc = await start(make_spec(tmp_path, command, marker))
        tracker = DescendantTracker()
        tracker.watch(marker, [proc])
        hidden = int(await wait_for_file(tmp_path / "hidden.pid"))
        try:
            tracker.poll()
            (tmp_path / "release").touch()
            # Its parent has exited: the hidden process is reparented, in its own session, unmarked.
            assert await finish(proc) == 0
            assert hidden not in {info.pid for info in find_task_processes(marker, [proc.key])}
            assert hidden in {key.pid for key in tracker.tracked(marker)}
            result = await terminate_tree([proc], marker, grace_s=1.0, tracker=tracker)
            assert result.clean
        finally:
            kill_quietly({hidden})
        return hidden

    hidden = asyncio.run(main())
    assert not alive(hidden)


def test_terminate_tree_returns_promptly_when_processes_exit_on_sigterm(tmp_path: Path, marker: str) -> None:
    async def main() -> None:
        proc = await start(make_spec(tmp_path, "sleep 300 & sleep 300 & echo up; wait", marker))
        await wait_for_file(tmp_path / "logs" / "out.log")
        began = time.monotonic()
        result = await terminate_tree([proc], marker, grace_s=5.0)
        assert time.monotonic() - began < 1.0
        assert result.killed == 0
        assert result.clean
        assert await finish(proc) == 143

    asyncio.run(main())
    assert marked_pids(marker) == set()


def test_kill_leftovers_ends_background_child_of_finished_process(tmp_path: Path, marker: str) -> None:
    async def main() -> int:
        proc = await start(make_spec(tmp_path, "sleep 300 & echo $! > child.pid", marker))
        assert await finish(proc) == 0
        child = int(await wait_for_file(tmp_path / "child.pid"))
        assert marked_pids(marker) == {child}
        result = await kill_leftovers([proc], marker)
        assert (result.signalled, result.killed, result.survivors) == (0, 1, ())
        return child

    child = asyncio.run(main())
    assert not alive(child)


def test_terminate_tree_without_processes_ends_marked_ones(tmp_path: Path, marker: str) -> None:
    async def main() -> None:
        proc = await start(make_spec(tmp_path, "sleep 300 & wait", marker))
        await asyncio.sleep(0.1)
        # E.g. after an agent restart: only the marker is known.
        result = await terminate_tree([], marker, grace_s=1.0)
        assert result.clean
        assert await finish(proc) == 143

    asyncio.run(main())
    assert marked_pids(marker) == set()


def test_running_pids_tracks_unawaited_processes(tmp_path: Path, marker: str) -> None:
    async def main() -> None:
        proc = await start(make_spec(tmp_path, ["sleep", "30"], marker))
        assert proc.pid in running_pids()
        proc_key = proc.key
        assert proc_key.pid == proc.pid
        assert proc_key.start is not None
        os.kill(proc.pid, signal.SIGKILL)
        await finish(proc)
        assert proc.pid not in running_pids()

    asyncio.run(main())


def test_subreaper_reaps_orphans_but_not_own_children(tmp_path: Path) -> None:
    helper = Path(__file__).with_name("reaper_helper.py")
    done = subprocess.run(
        [PY, "-W", "error", str(helper), str(tmp_path)], capture_output=True, text=True, timeout=15, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "ok"
