"""The agent learns of task exits through pidfds in its event loop, without a thread per task."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = textwrap.dedent(
    """
    import asyncio, threading, warnings
    from corral.agent.main import _watch_children_by_pidfd

    _watch_children_by_pidfd()

    async def main():
        procs = [await asyncio.create_subprocess_exec("sleep", "0.3") for _ in range(20)]
        threads = threading.active_count()
        codes = [await p.wait() for p in procs]
        return threads, codes

    threads, codes = asyncio.run(main())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        watcher = type(asyncio.get_child_watcher()).__name__
    print(threads, codes == [0] * 20, watcher)
    """
)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 and later watch children by pidfd on their own")
def test_twenty_running_tasks_need_no_waiting_threads():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=True)
    threads, all_zero, watcher = out.stdout.split()
    assert watcher == "PidfdChildWatcher"
    assert all_zero == "True"
    assert int(threads) == 1  # the default watcher would run a thread per child: 21
