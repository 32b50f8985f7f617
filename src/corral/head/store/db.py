"""Engine and sessions: SQLite in WAL mode by default, PostgreSQL by URL."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
WRITE_LOCK_KEY = 0x636F7272616C  # "corral": the advisory lock every PostgreSQL write transaction takes
MIGRATE_LOCK_KEY = WRITE_LOCK_KEY + 1


class Database:
    """One engine and two session kinds: reads, and writes that lock up front.

    SQLite lets a read transaction upgrade to a write only if nobody else wrote in
    between; it fails at once otherwise (no busy wait). Write sessions therefore
    start with ``BEGIN IMMEDIATE`` and wait their turn on the busy timeout. On
    PostgreSQL a write starts by taking one advisory lock, so writes are serialized
    the same way, across every head sharing the database.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            self.engine: Engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
            _configure_sqlite(self.engine)
            read_engine: Engine = self.engine
            write_engine: Engine = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        else:
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
            # A read sees one snapshot for its whole transaction, as a SQLite read does.
            read_engine = self.engine.execution_options(isolation_level="REPEATABLE READ")
            write_engine = self.engine
        self._sessions = sessionmaker(read_engine, expire_on_commit=False)
        self._write_sessions = sessionmaker(write_engine, expire_on_commit=False)
        # SQLite has one writer at a time, and a writer that finds the lock taken sleeps in steps
        # of up to 100 ms. Queueing this process's writers on a lock instead keeps them prompt;
        # on PostgreSQL it also keeps waiting writers from holding pooled connections. The lock
        # is first come, first served, so no writer (a heartbeat, a lease renewal) waits behind
        # ones that came later.
        self._write_lock = FifoLock()
        # (holder, fencing token) while a leader election runs (see corral.head.leader); plan applies check it.
        self.fencing: tuple[str, int] | None = None
        self._checked_out = 0
        self._closed = False
        self._migrated = False  # by this process: `corral head` migrates before serving, the app again
        self._returned = threading.Condition()
        event.listen(self.engine, "checkout", self._on_checkout)
        event.listen(self.engine, "checkin", self._on_checkin)

    def _on_checkout(self, *_args: Any) -> None:
        with self._returned:
            self._checked_out += 1

    def _on_checkin(self, dbapi_connection: Any, *_args: Any) -> None:
        with self._returned:
            self._checked_out -= 1
            self._returned.notify_all()
            if self._closed and dbapi_connection is not None:  # returned after close(): nobody will reuse it
                with contextlib.suppress(Exception):
                    dbapi_connection.close()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction that commits on success and rolls back on any error."""
        with self._write_lock, self._write_sessions() as session:
            try:
                if not self.is_sqlite:
                    # Writers queue one at a time across every head, as SQLite's BEGIN IMMEDIATE makes them:
                    # plan_apply's re-checks rely on nobody writing between its reads and its writes.
                    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITE_LOCK_KEY})
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def migrate(self) -> None:
        """Bring the schema to the newest migration (idempotent; once per process)."""
        if self._migrated:
            return
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        with self.engine.begin() as connection:
            if not self.is_sqlite:  # heads starting together migrate one after the other
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATE_LOCK_KEY})
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        self._migrated = True

    def close(self, wait_s: float = 3.0) -> None:
        """Close every connection, after waiting a little for work still running in threads to finish."""
        with self._returned:
            self._returned.wait_for(lambda: self._checked_out <= 0, timeout=wait_s)
            self._closed = True
        self.engine.dispose()


class FifoLock:
    """A lock handed to waiting threads in the order they asked for it.

    ``threading.Lock`` lets any waiter, or the releasing thread itself, take it next; under
    steady contention some waiters then wait many turns. Here the releasing thread hands the
    lock directly to the longest waiter."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def acquire(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the holder when it hands over; the lock is ours then

    def release(self) -> None:
        with self._guard:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False

    def __enter__(self) -> FifoLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN / our BEGIN IMMEDIATE drive transactions.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "")
        connection.exec_driver_sql(f"BEGIN {mode}".strip())


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"
