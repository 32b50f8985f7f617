"""Engine and sessions: SQLite in WAL mode by default, PostgreSQL by URL."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


class Database:
    """One engine and two session kinds: reads, and writes that lock up front.

    SQLite lets a read transaction upgrade to a write only if nobody else wrote in
    between; it fails at once otherwise (no busy wait). Write sessions therefore
    start with ``BEGIN IMMEDIATE`` and wait their turn on the busy timeout.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        connect_args: dict[str, Any] = {"check_same_thread": False, "timeout": 30} if self.is_sqlite else {}
        self.engine: Engine = create_engine(url, connect_args=connect_args, pool_pre_ping=not self.is_sqlite)
        if self.is_sqlite:
            _configure_sqlite(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        write_engine = self.engine.execution_options(sqlite_begin="IMMEDIATE") if self.is_sqlite else self.engine
        self._write_sessions = sessionmaker(write_engine, expire_on_commit=False)
        # SQLite has one writer at a time, and a writer that finds the lock taken sleeps in steps
        # of up to 100 ms. Queueing this process's writers on a lock instead keeps them prompt.
        self._write_lock: threading.Lock | contextlib.nullcontext[None] = (
            threading.Lock() if self.is_sqlite else contextlib.nullcontext()
        )

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction that commits on success and rolls back on any error."""
        with self._write_lock, self._write_sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def migrate(self) -> None:
        """Bring the schema to the newest migration (idempotent)."""
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()


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
