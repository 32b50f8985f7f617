"""Fixtures for the command-line tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import pidlock


class Locks:
    """Locks held as a running head or agent holds its own (``corral.pidlock``), this test's process
    standing in for the daemon: `corral up` and `corral down` take a recorded pid for theirs only while it
    holds its lock."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}

    def hold(self, lock: Path) -> int:
        """Hold ``lock``; answers the pid written in it (this process's)."""
        lock.parent.mkdir(parents=True, exist_ok=True)
        self._fds[lock] = pidlock.hold(lock)
        return os.getpid()

    def release(self, lock: Path) -> None:
        os.close(self._fds.pop(lock))

    def release_all(self) -> None:
        for lock in list(self._fds):
            self.release(lock)


@pytest.fixture
def locks() -> Iterator[Locks]:
    held = Locks()
    yield held
    held.release_all()
