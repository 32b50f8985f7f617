"""A throw-away PostgreSQL server for tests: initdb into a temporary directory, start, stop.

``initdb`` refuses to run as root, so as root the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from corral.testing.net import free_port

SERVER_USER = "postgres"


def find_bin_dir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` live: on PATH, or Debian's versioned directory."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version_key)
    return Path(candidates[-1]).parent if candidates else None


def _version_key(path: str) -> float:
    try:
        return float(Path(path).parent.parent.name)
    except ValueError:
        return 0.0


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None if one can."""
    if find_bin_dir() is None:
        return "PostgreSQL server binaries not found (install the 'postgresql' package)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run initdb as"
        if shutil.which("runuser") is None:
            return "running as root and 'runuser' is missing"
    return None


@dataclass
class PostgresServer:
    """One running server on 127.0.0.1, trusting local connections as user ``postgres``."""

    data_dir: Path
    port: int
    bin_dir: Path

    @classmethod
    def start(cls, max_connections: int = 300) -> PostgresServer:
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL server binaries not found")
        root = Path(tempfile.mkdtemp(prefix="corral-pg-"))
        data_dir = root / "data"
        data_dir.mkdir()
        if os.geteuid() == 0:
            account = pwd.getpwnam(SERVER_USER)
            for path in (root, data_dir):
                os.chown(path, account.pw_uid, account.pw_gid)
        server = cls(data_dir=data_dir, port=free_port(), bin_dir=bin_dir)
        server._run("initdb", "-D", str(data_dir), "-A", "trust", "-U", SERVER_USER, "--no-sync", "-E", "UTF8")
        options = (
            f"-p {server.port} -k {data_dir} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections={max_connections}"
        )
        server._run("pg_ctl", "-D", str(data_dir), "-w", "-l", str(data_dir / "server.log"), "-o", options, "start")
        return server

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/", check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{program} failed ({result.returncode}): {result.stderr.strip() or result.stdout}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run one statement outside a transaction (CREATE / DROP DATABASE need that)."""
        import psycopg

        dsn = f"host=127.0.0.1 port={self.port} user={SERVER_USER} dbname={database}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.encode())  # statements built from our own identifiers

    def empty_tables(self, database: str, keep: tuple[str, ...] = ("alembic_version",)) -> None:
        """Delete every row of every table (the schema stays) and restart every sequence, as in a new
        database, in one statement. DELETE rather than TRUNCATE, which makes new files for every table
        and index: on tables this small several times slower. Foreign keys are not checked meanwhile
        (``session_replication_role``), so the tables empty in any order."""
        kept = ", ".join(f"'{name}'" for name in keep)
        self.execute(
            "DO $$ DECLARE name text; BEGIN "
            "SET LOCAL session_replication_role = replica; "
            "FOR name IN SELECT quote_ident(tablename) FROM pg_tables "
            f"WHERE schemaname = 'public' AND tablename NOT IN ({kept}) LOOP "
            "EXECUTE 'DELETE FROM ' || name; END LOOP; "
            "FOR name IN SELECT quote_ident(sequencename) FROM pg_sequences WHERE schemaname = 'public' LOOP "
            "EXECUTE 'ALTER SEQUENCE ' || name || ' RESTART'; END LOOP; END $$",
            database,
        )

    def create_database(self, name: str, template: str | None = None) -> str:
        clause = f" TEMPLATE {template}" if template else ""
        self.execute(f"CREATE DATABASE {name}{clause}")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.data_dir.parent, ignore_errors=True)
