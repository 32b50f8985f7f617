"""Each node's desired tasks as JSON, kept in memory between builds of its desired state.

What the head tells an agent about a task (its command, environment, GPUs, hosts) is fixed once the
task is handed out, but for two things read with the node's task list at every build: rank 0's
rendezvous port, filled in when its agent reports it, and a gang's hosts, whose addresses come from
the other nodes' rows. A piece is therefore kept under its task id, that port and those hosts, and a
build reads the node's live tasks (which tasks, in which state: cheap columns) and serialises only the
tasks it has no piece for. Which tasks are listed is always read afresh: a piece is never a reason to
list a task, so a task that ended since a piece was made is left out as before.

Rank 0's port enters its own node's desired state without a new version (a one-node job's rank 0 reports
one too): the agent never applies a version twice, and already runs the task with that port. Advancing
the version for it would send the node's whole desired state again after every heartbeat that reports
tasks started, for nothing; keying the piece on the port keeps every build correct without it.

Everything else in a piece comes from rows that do not change while the task is wanted (the job's
spec, name, owner and restart count; the task's GPUs and address), or from the node's own row, which
changes only when the node registers, with a new credential: the pieces of a node are dropped when
its credential's hash differs from the one they were made under (read in the same transaction as the
tasks, so a registration through another head is seen too).

Memory: a node keeps the pieces of the tasks its last build listed, no others. Two builds for one
node at once (a heartbeat and the agent's long-poll, answering the same new version) take turns, so
the second uses what the first made.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PieceKey = tuple[str, int, tuple[tuple[str, int], ...]]
"""A task's id, rank 0's rendezvous port (0 while unknown), and a gang's hosts (address, slots)."""


@dataclass
class _Node:
    token_hash: str = ""
    pieces: dict[PieceKey, bytes] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class DesiredPieces:
    """The serialised desired tasks of every node, by ``PieceKey``."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.Lock()

    @contextmanager
    def node(self, name: str, token_hash: str) -> Iterator[dict[PieceKey, bytes]]:
        """The node's pieces, held for this build alone; emptied first when made under another credential.
        The caller leaves in it the pieces of the tasks it listed (see ``keep``)."""
        with self._lock:
            node = self._nodes.setdefault(name, _Node())
        with node.lock:
            if node.token_hash != token_hash:
                node.pieces = {}
                node.token_hash = token_hash
            yield node.pieces

    def forget(self, name: str) -> None:
        with self._lock:
            self._nodes.pop(name, None)

    def count(self, name: str) -> int:
        """How many pieces the node keeps (for tests and metrics)."""
        with self._lock:
            node = self._nodes.get(name)
        return 0 if node is None else len(node.pieces)


def keep(pieces: dict[PieceKey, bytes], listed: dict[PieceKey, bytes]) -> None:
    """Leave in ``pieces`` exactly those of the tasks just listed: those of tasks that ended go."""
    pieces.clear()
    pieces.update(listed)
