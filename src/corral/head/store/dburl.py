"""Checking a database URL before the head starts: what it names, and whether that can be opened.

``check_db_url`` only reads (it creates no file and opens no connection), so the CLI can refuse a bad
``--db`` before anything exists on disk; ``probe_db`` then opens a PostgreSQL connection once."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

DB_URL_HELP = "sqlite:///PATH (a file; a relative PATH is under CORRAL_HOME) or postgresql+psycopg://USER@HOST/DB"


def check_db_url(url: str, home: Path) -> str:
    """The URL the head should use, a relative SQLite path made absolute under ``home``.

    Raises ``ValueError`` saying what is wrong and what is valid: not a URL, a database other than
    SQLite or PostgreSQL, a driver that is not installed, an in-memory SQLite database (each
    connection would see its own, empty one), or a SQLite file whose directory does not exist."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(f"{url!r} is not a database URL; expected {DB_URL_HELP}") from None
    except ValueError:  # a port that is not a number
        raise ValueError(f"{url!r}: the port after HOST: must be a number; expected {DB_URL_HELP}") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise ValueError(f"{url!r}: Corral stores its state in SQLite or PostgreSQL only; expected {DB_URL_HELP}")
    try:
        parsed.get_dialect().import_dbapi()
    except (NoSuchModuleError, ImportError) as exc:
        raise ValueError(
            f"{url!r}: the database driver is not installed or unknown ({exc}); expected {DB_URL_HELP}"
        ) from None
    if backend == "postgresql":
        return url
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        raise ValueError(
            f"{url!r} is an in-memory database, which every connection of the head sees empty; "
            f"give a file: {DB_URL_HELP}"
        )
    path = Path(database).expanduser()
    if not path.is_absolute():
        path = home / path
    if path.is_dir():
        raise ValueError(f"{url!r}: {path} is a directory; give a file: {DB_URL_HELP}")
    if path.parent != home and not path.parent.is_dir():  # the head creates CORRAL_HOME itself
        raise ValueError(f"{url!r}: the directory {path.parent} does not exist; create it, or give another path")
    return parsed.set(database=str(path)).render_as_string(hide_password=False)


def probe_db(url: str, timeout_s: int = 5) -> None:
    """Open one PostgreSQL connection (SQLite files are opened by the head itself); raises
    ``ConnectionError`` with the reason on one line when the server cannot be reached."""
    if not url or make_url(url).get_backend_name() != "postgresql":
        return
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(url, connect_args={"connect_timeout": timeout_s})
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        where = repr(make_url(url))  # the password hidden
        raise ConnectionError(f"cannot connect to the database at {where}: {reason[0] if reason else exc}") from None
    finally:
        engine.dispose()
