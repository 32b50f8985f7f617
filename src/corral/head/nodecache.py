"""The registered nodes as the scheduler's values, kept between reads.

A node's GPUs and labels change only when its agent registers, which also gives the node a new
credential: they are read again only for nodes whose credential hash changed, and the rest of a
row (a few plain columns: state, health, last heartbeat) is read every time. A node whose values
are unchanged is the same ``Node`` object as at the last read, so scheduling cycles and
submissions do not decode every node's GPU list each time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.services.convert import effective_gpus, effective_state, gpus_of
from corral.head.store.tables import NodeRow
from corral.model import Gpu, Node, NodeState

_CHUNK = 500  # names per IN (...) query when GPU lists are read again

_Layout = tuple[str, tuple[Gpu, ...], dict[str, str]]  # (credential hash, GPUs, labels)
_Key = tuple[Any, ...]


class NodeModels:
    """``Node`` values of the registered nodes, re-read only where a node registered again."""

    def __init__(self) -> None:
        self._layouts: dict[str, _Layout] = {}
        self._made: dict[tuple[str, bool], tuple[_Key, Node]] = {}
        self._lock = threading.Lock()

    def load(self, session: Session, heard_since: datetime | None = None) -> tuple[Node, ...]:
        """Every registered node, by name; with ``heard_since``, as the scheduler may use it now
        (see ``convert.node_model``)."""
        rows = session.execute(
            select(
                NodeRow.name,
                NodeRow.token_hash,
                NodeRow.state,
                NodeRow.cpus,
                NodeRow.memory_mb,
                NodeRow.container_runtime,
                NodeRow.health_problem,
                NodeRow.unhealthy_gpus,
                NodeRow.last_heartbeat,
            ).order_by(NodeRow.name)
        ).all()
        with self._lock:
            stale = [r.name for r in rows if (known := self._layouts.get(r.name)) is None or known[0] != r.token_hash]
            if stale:
                self._read_layouts(session, stale)
            nodes = []
            for row in rows:
                token_hash, gpus, labels = self._layouts[row.name]
                state = NodeState(row.state)
                unhealthy: tuple[str, ...] = ()
                if heard_since is not None:
                    state = effective_state(state, row.last_heartbeat, row.health_problem, heard_since)
                    unhealthy = tuple(sorted(row.unhealthy_gpus))
                key = (token_hash, state, unhealthy, row.cpus, row.memory_mb, row.container_runtime)
                made = self._made.get((row.name, heard_since is not None))
                if made is None or made[0] != key:
                    node = Node(
                        name=row.name,
                        state=state,
                        gpus=effective_gpus(gpus, unhealthy),
                        cpus=row.cpus,
                        memory_mb=row.memory_mb,
                        labels=dict(labels),
                        container_runtime=row.container_runtime,
                    )
                    made = self._made[(row.name, heard_since is not None)] = (key, node)
                nodes.append(made[1])
            if len(self._layouts) > len(rows):  # nodes removed: forget them
                names = {r.name for r in rows}
                self._layouts = {n: v for n, v in self._layouts.items() if n in names}
                self._made = {k: v for k, v in self._made.items() if k[0] in names}
        return tuple(nodes)

    def _read_layouts(self, session: Session, names: Sequence[str]) -> None:
        for start in range(0, len(names), _CHUNK):
            chunk = names[start : start + _CHUNK]
            query = select(NodeRow.name, NodeRow.token_hash, NodeRow.gpus, NodeRow.labels).where(
                NodeRow.name.in_(chunk)
            )
            for name, token_hash, gpus, labels in session.execute(query):
                self._layouts[name] = (token_hash, gpus_of(gpus), dict(labels))
