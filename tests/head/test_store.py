"""Schema migrations, restarts on the same state, and the API description."""

from sqlalchemy import inspect

from corral.head.store.db import Database, sqlite_url

TABLES = {"jobs", "tasks", "gpu_claims", "nodes", "events", "tokens", "meta", "alembic_version"}


def test_migrate_twice_is_idempotent(tmp_path):
    db = Database(sqlite_url(tmp_path / "corral.db"))
    try:
        db.migrate()
        db.migrate()
        inspector = inspect(db.engine)
        assert set(inspector.get_table_names()) >= TABLES
        indexes = {ix["name"]: ix for ix in inspector.get_indexes("gpu_claims")}
        assert indexes["uq_gpu_claims_whole"]["unique"]
        columns = {c["name"] for c in inspector.get_columns("jobs")}
        assert {"id", "state", "spec", "idempotency_key", "generation", "restarts", "reason"} <= columns
    finally:
        db.close()


def test_sqlite_runs_in_wal_mode(tmp_path):
    db = Database(sqlite_url(tmp_path / "corral.db"))
    try:
        db.migrate()
        with db.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        db.close()


def test_openapi_and_docs_answer(head):
    spec = head.client.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    for path in ("/v1/jobs", "/v1/jobs/batch", "/v1/jobs/{job_id}", "/v1/nodes", "/v1/agents/register"):
        assert path in paths
    docs = head.client.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


def test_a_restarted_head_keeps_its_state_and_tokens(tmp_path, clock, start_head):
    home = tmp_path / "home"
    with start_head(home, clock) as first:
        admin, join = first.admin_token, first.join_token()
        first.register("n1")
        job = first.submit({"command": "x", "resources": {"gpus": 1}})
        first.cycle()
    with start_head(home, clock) as second:
        assert second.admin_token == admin
        assert second.join_token() == join
        restored = second.job(job["id"])
        assert restored["allocation"] == [{"node": "n1", "gpus": [0], "gpu_fraction": 1.0}]
        assert list(second.nodes()) == ["n1"]


def test_a_lost_client_config_gets_a_new_admin_token(tmp_path, clock, start_head):
    home = tmp_path / "home"
    with start_head(home, clock) as first:
        old = first.admin_token
    (home / "client.json").unlink()
    with start_head(home, clock) as second:
        assert second.admin_token != old
        assert (home / "client.json").exists()
        assert second.client.get("/v1/jobs", headers=second.auth(old)).status_code == 200  # not revoked


def test_the_migrations_build_exactly_the_models(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from corral.head.store.db import Database, sqlite_url
    from corral.head.store.tables import Base

    db = Database(sqlite_url(tmp_path / "m.db"))
    db.migrate()
    with db.engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    db.close()
