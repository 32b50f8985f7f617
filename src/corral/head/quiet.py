"""Quiet heartbeats: answered from memory, their times written in batches.

Most heartbeats repeat what their node said last time (the same tasks in the same states, the same
health) while its desired state has not changed. Handling one changes nothing but the node's
last-heard time, so after a heartbeat has been handled in full (a write transaction), this head
remembers what it looked like and the answer it got. A later heartbeat that matches it, for a desired
state that is still at the remembered version, gets the same answer at once; its time goes into
``heard`` and reaches the database with the next ``take_heard`` batch. Anything else, a changed
report, a new version (every change of the node's tasks, registration, being declared lost bumps it),
a different token, is handled in full.

It also keeps what the liveness check needs to tell a silent agent from a late head: when each node
was last heard (a heartbeat's arrival, and the moment its answer left), and which nodes have a
heartbeat the head holds and has not answered yet (waiting for a thread or the database, or being
handled). An agent sends its next heartbeat only once the last one is answered, so while the head
holds one the node is not silent: the head is late.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.api import HeartbeatRequest, TaskReport
from corral.head.security import same_token


def report_key(r: TaskReport) -> tuple[Any, ...]:
    return (r.task_id, r.generation, r.state, r.exit_code, r.detail, r.master_port, r.checkpoint_at, r.interrupted)


def fingerprint(req: HeartbeatRequest) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """What in a heartbeat can change the head's state: the task reports, and the node's health."""
    reports = tuple(sorted(report_key(r) for r in req.tasks))
    errors = tuple(sorted((s.index, s.ecc_uncorrectable, s.xid_errors) for s in req.samples))
    return reports, (req.health_problem, bool(req.samples), errors, req.leaving)


@dataclass(frozen=True)
class Handled:
    """A heartbeat handled in full, and its answer."""

    token_hash: str
    version: int
    applied_version: int
    applied_matters: bool  # some task it was handed is not reported yet: a newer applied version would lose it
    fingerprint: tuple[tuple[Any, ...], tuple[Any, ...]]
    answer: bytes


class QuietBeats:
    def __init__(self) -> None:
        self._handled: dict[str, Handled] = {}
        self._heard: dict[str, datetime] = {}
        self._last_heard: dict[str, datetime] = {}  # not taken by ``take_heard``: what the check reads
        self._in_flight: dict[str, int] = {}
        self._lock = threading.Lock()

    def answer(self, node: str, token: str, req: HeartbeatRequest, version: int | None) -> bytes | None:
        """The remembered answer if this heartbeat repeats the last one handled, for ``version``
        (the node's desired-state version as this head knows it); otherwise None."""
        handled = self._handled.get(node)
        if handled is None or version is None or handled.version != version:
            return None
        applied = req.applied_version
        if applied != handled.applied_version and (
            handled.applied_matters or not handled.applied_version <= applied <= handled.version
        ):
            return None
        if not same_token(token, handled.token_hash):
            return None
        return handled.answer if fingerprint(req) == handled.fingerprint else None

    def remember(
        self, node: str, token_hash: str, version: int, req: HeartbeatRequest, answer: bytes, applied_matters: bool
    ) -> None:
        handled = Handled(token_hash, version, req.applied_version, applied_matters, fingerprint(req), answer)
        self._handled[node] = handled

    def handled_reports(self, node: str, token: str) -> frozenset[tuple[Any, ...]]:
        """The reports (``report_key``) of the node's last heartbeat handled in full with this token:
        the head has applied each of them, and applying one again would change nothing."""
        handled = self._handled.get(node)
        if handled is None or not same_token(token, handled.token_hash):
            return frozenset()
        return frozenset(handled.fingerprint[0])

    def forget(self, node: str) -> None:
        self._handled.pop(node, None)

    def knows(self, node: str, token: str) -> bool:
        """Whether ``token`` is the credential of the node's last heartbeat handled in full."""
        handled = self._handled.get(node)
        return handled is not None and same_token(token, handled.token_hash)

    def heard(self, node: str, when: datetime) -> None:
        with self._lock:
            if node not in self._heard or self._heard[node] < when:
                self._heard[node] = when
            if node not in self._last_heard or self._last_heard[node] < when:
                self._last_heard[node] = when

    def arrived(self, node: str, when: datetime) -> None:
        """A heartbeat with the node's credential arrived at ``when``; ``answered`` follows it."""
        with self._lock:
            self._in_flight[node] = self._in_flight.get(node, 0) + 1
        self.heard(node, when)

    def answered(self, node: str, when: datetime) -> None:
        """The head is done with a heartbeat ``arrived`` announced (answered or refused) at ``when``."""
        with self._lock:
            left = self._in_flight.get(node, 0) - 1
            if left > 0:
                self._in_flight[node] = left
            else:
                self._in_flight.pop(node, None)
        self.heard(node, when)

    def heard_after(self, node: str, deadline: datetime) -> bool:
        """Whether the head holds a heartbeat of the node, or heard one after ``deadline``."""
        with self._lock:
            if self._in_flight.get(node, 0) > 0:
                return True
            last = self._last_heard.get(node)
        return last is not None and last > deadline

    def take_heard(self) -> dict[str, datetime]:
        """The nodes heard from since the last call, each with the time it was last heard."""
        with self._lock:
            heard, self._heard = self._heard, {}
        return heard
