"""An exclusive lock on a file that names its holder: one process per state directory."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Held(Exception):
    """Another process holds the lock; ``holder`` is the pid it wrote ("?" if none yet)."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"held by pid {holder}")
        self.holder = holder


def hold(path: Path) -> int:
    """Lock ``path`` for as long as this process lives (programs it runs do not inherit the descriptor)
    and write this process's pid into it; the descriptor is returned, to be kept open."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Held(path.read_text().strip() or "?") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def holder(path: Path) -> str | None:
    """The pid (as written) of the process that holds ``path`` now; None if none does. Taking the lock for a
    moment, shared and let go at once, tells without disturbing the holder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return path.read_text().strip() or "?"
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
