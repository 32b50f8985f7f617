"""The agent reads only its own subtree of processes, not all of /proc, when that is enough."""

from __future__ import annotations

import os
import subprocess
import time

from corral.agent.launch.procfs import children_of, snapshot, subtree


def test_the_subtree_holds_children_and_grandchildren_and_nothing_else():
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(children_of(shell.pid) or []) < 2:
            assert time.monotonic() < deadline, "the shell did not start its two sleeps"
            time.sleep(0.02)
        below = subtree(os.getpid())
        assert below is not None
        grandchildren = set(children_of(shell.pid) or [])
        assert {os.getpid(), shell.pid} | grandchildren <= set(below)
        everything = snapshot()
        assert all(everything[pid].key == info.key for pid, info in below.items() if pid in everything)
        assert 1 not in below  # not the whole machine
        for pid in grandchildren:
            assert below[pid].ppid == shell.pid
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(shell.pid)], check=False)  # the sleeps first
        shell.kill()
        shell.wait()


def test_a_process_that_is_gone_has_no_children_list():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert children_of(gone.pid) is None
    assert subtree(gone.pid) is None
