"""Run as a separate process by test_launch: makes itself a subreaper, which must not leak into pytest."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from corral.agent.launch import ProcessSpec, become_subreaper, is_subreaper, kill_leftovers, reap_orphans, start
from corral.agent.launch.tree import _nothing_left


def zombie_child(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return False
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            return True
        time.sleep(0.01)
    return False


async def orphan_is_reaped(workdir: Path) -> None:
    spec = ProcessSpec(
        command="sleep 0.2 & echo $! > orphan.pid; exit 7",
        env={"PATH": os.environ["PATH"]},
        cwd=workdir,
        log_path=workdir / "out.log",
        marker=uuid.uuid4().hex,
    )
    proc = await start(spec)
    own = await start(ProcessSpec(["sh", "-c", "sleep 0.3; exit 4"], spec.env, workdir, spec.log_path, spec.marker))
    assert await proc.wait() == 7
    orphan = int((workdir / "orphan.pid").read_text())
    assert zombie_child(orphan), "the orphan should become our zombie child"
    assert reap_orphans() == [orphan]
    assert not Path(f"/proc/{orphan}").exists()
    assert await own.wait() == 4, "our own child's exit status must survive reap_orphans"


def other_waiters_keep_their_status() -> None:
    # A child in another session that its starter waits for itself: protected by known_pids.
    foreign = subprocess.Popen(["sh", "-c", "exit 9"], start_new_session=True)
    assert zombie_child(foreign.pid)
    assert reap_orphans(known_pids={foreign.pid}) == []
    assert foreign.wait() == 9
    # A child in our own session (ordinary subprocess use) is never touched.
    local = subprocess.Popen(["sh", "-c", "exit 3"])
    assert zombie_child(local.pid)
    assert reap_orphans() == []
    assert local.wait() == 3


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def pid_in(path: Path, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} did not appear"
        await asyncio.sleep(0.01)
    return int(path.read_text())


async def leftovers_are_found_from_the_children_of_a_subreaper(workdir: Path) -> None:
    env = {"PATH": os.environ["PATH"]}
    other = await start(ProcessSpec(["sleep", "30"], env, workdir, workdir / "other.log", uuid.uuid4().hex))
    # A task that ended cleanly while another one runs: nothing of it is left, told from our children alone.
    clean = await start(ProcessSpec("true", env, workdir, workdir / "clean.log", uuid.uuid4().hex))
    assert await clean.wait() == 0
    assert _nothing_left([clean.key], [])
    assert (await kill_leftovers([clean], clean.marker)).survivors == ()
    # A background child, and one that left the session with setsid and a double fork: both are ours to end.
    for name, command in (
        ("background", "sleep 300 & echo $! > background.pid"),
        ("escaped", "setsid sh -c 'sleep 300 & echo $! > escaped.pid' < /dev/null"),
    ):
        task = await start(ProcessSpec(command, env, workdir, workdir / f"{name}.log", uuid.uuid4().hex))
        assert await task.wait() == 0
        left = await pid_in(workdir / f"{name}.pid")
        assert not _nothing_left([task.key], [])
        result = await kill_leftovers([task], task.marker)
        assert result.killed == 1 and result.survivors == (), (name, result)
        assert not alive(left), name
    other_key = other.key
    os.kill(other_key.pid, 9)
    await other.wait()


def main() -> None:
    assert become_subreaper()
    assert is_subreaper()
    asyncio.run(orphan_is_reaped(Path(sys.argv[1])))
    other_waiters_keep_their_status()
    asyncio.run(leftovers_are_found_from_the_children_of_a_subreaper(Path(sys.argv[1])))
    print("ok")


if __name__ == "__main__":
    main()
