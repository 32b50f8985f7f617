"""The leader lease: of the heads sharing one database, one runs the loops (scheduling, liveness, ...).

The lease is a row: its holder, when it expires, and a fencing token that grows by one with every
new holder. The leader renews it well before it expires; another head takes it over once it has
expired. Every plan apply re-reads the row in its own transaction and is refused if this head is no
longer the holder of the token it was given (a paused leader that lost the lease cannot write a
stale plan). All heads serve the API whoever leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.runtime import HeadRuntime
from corral.head.store.db import Database
from corral.head.store.tables import LeaseRow, NodeRow

log = logging.getLogger(__name__)
LEASE = "leader"
LEASE_S = 5.0
RENEW_S = 1.0
VERSION_POLL_S = 0.5


def holder_name(rt: HeadRuntime) -> str:
    """A head's identity: host and home. A head restarted in place takes its own lease back at once."""
    return f"{socket.gethostname()}:{rt.settings.home}"[:128]


class Leadership:
    def __init__(self, rt: HeadRuntime, holder: str | None = None, lease_s: float = LEASE_S) -> None:
        self.rt = rt
        self.holder = holder or holder_name(rt)
        self.lease_s = lease_s
        self.token: int | None = None

    @property
    def leading(self) -> bool:
        return self.token is not None

    def try_lead(self) -> bool:
        """Take or renew the lease if it is free, expired, ours, or held by an earlier run of this head."""
        now = self.rt.clock.now()
        expires = now + timedelta(seconds=self.lease_s)
        with self.rt.write() as session:
            row = session.get(LeaseRow, LEASE)
            if row is None:
                row = LeaseRow(name=LEASE, holder=self.holder, token=1, expires_at=expires)
                session.add(row)
            elif row.holder == self.holder and row.token == self.token:
                row.expires_at = expires
            elif row.holder == self.holder or row.expires_at <= now:
                row.holder, row.token, row.expires_at = self.holder, row.token + 1, expires
            else:
                self._set(None)
                return False
            self._set(row.token)
        return True

    def resign(self) -> None:
        """Let another head lead at once (on a clean shutdown)."""
        if self.token is None:
            return
        with self.rt.write() as session:
            row = session.get(LeaseRow, LEASE)
            if row is not None and row.holder == self.holder and row.token == self.token:
                row.expires_at = self.rt.clock.now()
        self._set(None)

    def _set(self, token: int | None) -> None:
        if token != self.token:
            log.info("leader lease: %s", f"leading with fencing token {token}" if token else "following")
        self.token = token
        self.rt.db.fencing = (self.holder, token) if token is not None else (self.holder, -1)


def still_leading(session: Session, db: Database) -> bool:
    """In a write transaction: may this head still write what its loops decided? (True without an election.)"""
    if db.fencing is None:
        return True
    holder, token = db.fencing
    row = session.get(LeaseRow, LEASE)
    return row is not None and row.holder == holder and row.token == token


async def lead_while_elected(rt: HeadRuntime, start_loops: Callable[[], list[asyncio.Task[None]]]) -> None:
    """Try for the lease every second; run the loops while holding it, stop them the moment it is lost."""
    leadership = Leadership(rt)
    loops: list[asyncio.Task[None]] = []
    try:
        while True:
            try:
                leading = await asyncio.to_thread(leadership.try_lead)
            except Exception:
                log.exception("leader lease: renewal failed")
                leading = False
            if leading and not loops:
                loops = start_loops()
            elif not leading and loops:
                await _stop(loops)
                loops = []
            await asyncio.sleep(RENEW_S)
            if rt.stopping:  # a clean shutdown began: let another head lead now, not once requests are over
                break
    finally:
        await _stop(loops)
        with contextlib.suppress(Exception):
            await asyncio.to_thread(leadership.resign)


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def watch_desired_versions(rt: HeadRuntime) -> None:
    """Wake this head's long-polling agents when another head changed their node's desired state."""
    while True:
        try:
            versions = await asyncio.to_thread(_versions, rt)
            if rt.notifier is not None:
                rt.notifier.nodes_changed(versions)
        except Exception:
            log.exception("reading desired-state versions failed")
        await asyncio.sleep(VERSION_POLL_S)


def _versions(rt: HeadRuntime) -> list[tuple[str, int]]:
    with rt.read() as session:
        return [
            (name, int(version)) for name, version in session.execute(select(NodeRow.name, NodeRow.desired_version))
        ]
