"""schemathesis against the head's OpenAPI schema, in-process: no 5xx, no answer that breaks the schema.

A bounded number of examples per operation keeps the whole run well under a minute. The head has a
node, a job and a service, so that some generated ids name real things.
"""

import warnings

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core import NotSet
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from corral.head.app import create_app
from corral.head.settings import HeadSettings
from corral.head.store.db import sqlite_url
from corral.testing import FakeClock
from corral.testing.postgres import PostgresServer, unavailable_reason

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r".*httpx2")
    from fastapi.testclient import TestClient

EXAMPLES_PER_OPERATION = 12
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database_url(request, tmp_path_factory):
    if request.param == "sqlite":
        yield sqlite_url(tmp_path_factory.mktemp("db") / "corral.db")
        return
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL half skipped: {reason}")
    server = PostgresServer.start()
    try:
        yield server.create_database("corral_fuzz")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def running_head(tmp_path_factory, database_url):
    home = tmp_path_factory.mktemp("head")
    app = create_app(HeadSettings(home=home, db_url=database_url), clock=FakeClock(), run_loops=False)
    with TestClient(app) as client:
        admin = {"Authorization": f"Bearer {app.state.admin_token}"}
        join = client.get("/v1/join-token", headers=admin).json()["token"]
        node = {
            "name": "n1",
            "gpus": [{"index": 0, "type": "H100", "memory_mb": 81920}],
            "cpus": 8,
            "memory_mb": 65536,
            "advertise_addr": "10.0.0.1",
            "gpu_source": "fake",
        }
        assert client.post("/v1/agents/register", json=node, headers={"Authorization": f"Bearer {join}"}).is_success
        assert client.post("/v1/jobs", json={"command": "sleep 1"}, headers=admin).is_success
        yield app, admin, client


def operations(app):
    schema = schemathesis.openapi.from_dict(app.openapi())
    for result in schema.get_all_operations():
        yield result.ok()


def send(client, case, admin):
    query = dict(case.query or {})
    if "wait" in query:
        query["wait"] = 0  # long-polls would only make the run slow
    if "follow" in query:
        query["follow"] = "false"
    headers = {**{k: str(v) for k, v in (case.headers or {}).items()}, **admin}
    kwargs = {}
    if case.body is not None and not isinstance(case.body, NotSet):
        if case.media_type == "application/json":
            kwargs["json"] = case.body
        else:
            kwargs["content"] = case.body if isinstance(case.body, bytes) else str(case.body).encode()
    return client.request(case.method, case.formatted_path, params=query, headers=headers, **kwargs)


def exercise(operation, client, admin):
    @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def one(case):
        response = send(client, case, admin)
        case.validate_response(response, checks=CHECKS)

    one()


def test_no_server_errors_and_answers_match_the_schema(running_head):
    app, admin, client = running_head
    failures = []
    for operation in operations(app):
        try:
            exercise(operation, client, admin)
        except Exception as exc:
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)
