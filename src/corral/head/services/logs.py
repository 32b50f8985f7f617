"""Job logs: agents ship each rank's output here; users read and follow it."""

from __future__ import annotations

import os
from pathlib import Path

from corral.head.runtime import HeadRuntime
from corral.head.services.common import Conflict, NotFound

MAX_CHUNK = 4 * 1024 * 1024


def log_path(rt: HeadRuntime, job_id: str, generation: int, rank: int) -> Path:
    return rt.settings.log_dir / job_id / str(generation) / f"rank-{rank}.log"


def append_chunk(rt: HeadRuntime, job_id: str, generation: int, rank: int, offset: int, data: bytes) -> int:
    """Write ``data`` at ``offset``; a retried chunk overwrites itself, a gap is refused."""
    if len(data) > MAX_CHUNK:
        raise Conflict(f"log chunk of {len(data)} bytes is larger than {MAX_CHUNK}")
    path = log_path(rt, job_id, generation, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if offset > size:
            raise Conflict(f"log offset {offset} is past the end ({size}); resend from {size}")
        os.pwrite(fd, data, offset)
        return max(size, offset + len(data))
    finally:
        os.close(fd)


def latest_log(rt: HeadRuntime, job_id: str, generation: int, rank: int) -> tuple[int, Path] | None:
    """The newest attempt's log for a rank, falling back to older attempts that have one: (its attempt, path)."""
    for gen in range(generation, -1, -1):
        path = log_path(rt, job_id, gen, rank)
        if path.exists():
            return gen, path
    return None


def read_from(path: Path | None, offset: int, limit: int = 1024 * 1024) -> bytes:
    if path is None:
        return b""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            return handle.read(limit)
    except FileNotFoundError:
        return b""


def check_rank(nodes: int, processes_per_node: int, rank: int) -> None:
    world = nodes * processes_per_node
    if rank < 0 or rank >= world:
        raise NotFound(f"no rank {rank}: the job has ranks 0 to {world - 1}")
