"""Run as a separate process by test_launch: makes itself a subreaper, which must not leak into pytest."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from corral.agent.launch import ProcessSpec, become_subreaper, is_subreaper, reap_orphans, start


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


def main() -> None:
    assert become_subreaper()
    assert is_subreaper()
    asyncio.run(orphan_is_reaped(Path(sys.argv[1])))
    other_waiters_keep_their_status()
    print("ok")


if __name__ == "__main__":
    main()
