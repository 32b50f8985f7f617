"""PostgreSQL specifics: the migrations build the models there too, and writes queue like SQLite's."""

import threading
import time

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from corral.head.store.db import Database
from corral.head.store.tables import Base, MetaRow


def test_the_migrations_build_exactly_the_models_on_postgresql(postgres_server):
    url = postgres_server.create_database("corral_migrations")
    try:
        db = Database(url)
        db.migrate()
        db.migrate()  # idempotent
        with db.engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
            indexes = {i["name"]: i for i in inspect(connection).get_indexes("gpu_claims")}
            assert indexes["uq_gpu_claims_whole"]["unique"]
            query = "SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_gpu_claims_whole'"
            definition = connection.scalar(text(query))
            assert "WHERE (fraction >= (1.0)" in definition
        db.close()
    finally:
        postgres_server.drop_database("corral_migrations")


def test_two_heads_migrating_at_once_both_succeed(postgres_server):
    url = postgres_server.create_database("corral_race")
    try:
        dbs = [Database(url), Database(url)]
        errors = []

        def migrate(db):
            try:
                db.migrate()
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=migrate, args=(db,)) for db in dbs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        for db in dbs:
            db.close()
    finally:
        postgres_server.drop_database("corral_race")


def test_write_transactions_of_two_engines_never_overlap(postgres_url):
    """Two heads (two engines) writing the same database take turns, as SQLite writers do."""
    first, second = Database(postgres_url), Database(postgres_url)
    inside = []
    overlaps = []

    def writer(db, key):
        for i in range(10):
            with db.write() as session:
                inside.append(key)
                if len(inside) > 1:
                    overlaps.append(tuple(inside))
                session.merge(MetaRow(key=f"{key}-{i}", value="x"))
                time.sleep(0.005)
                inside.remove(key)

    threads = [threading.Thread(target=writer, args=(db, key)) for db, key in ((first, "a"), (second, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert overlaps == []
    with first.read() as session:
        assert session.query(MetaRow).filter(MetaRow.key.like("a-%")).count() == 10
    first.close()
    second.close()


def test_reads_see_one_snapshot(postgres_url):
    db = Database(postgres_url)
    with db.write() as session:
        session.add(MetaRow(key="k", value="before"))
    with db.read() as session:
        assert session.get(MetaRow, "k").value == "before"
        with db.write() as writer:
            writer.get(MetaRow, "k").value = "after"
        session.expire_all()
        assert session.get(MetaRow, "k").value == "before"  # the same snapshot for the whole read
    with db.read() as session:
        assert session.get(MetaRow, "k").value == "after"
    db.close()
