"""Inputs the fuzzers found mishandled, kept as plain regression tests."""

import math
import warnings

import pytest

from corral.head.app import create_app
from corral.head.settings import HeadSettings
from corral.head.store.db import sqlite_url
from corral.spec import SpecError, parse_job_spec

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r".*httpx2")
    from fastapi.testclient import TestClient


def errors_of(document):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(document)
    return {e.field: e.message for e in caught.value.errors}


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"command": "x", "time_limit": ["1h"]}, "time_limit"),
        ({"command": "x", "grace_period": {"s": 1}}, "grace_period"),
        ({"command": "x", "resources": {"memory": ["1GB"]}}, "resources.memory"),
        ({"command": "x", "resources": {"memory": math.inf}}, "resources.memory"),
        ({"command": "x", "resources": {"memory": "9999999TB"}}, "resources.memory"),
        ({"command": "x", "time_limit": math.inf}, "time_limit"),
        ({"command": "x", "time_limit": math.nan}, "time_limit"),
        ({"command": "x", "": 1}, '""'),
        ({"command": "x", "function-after": 1}, "function-after"),
        ({"command": "x", "str": 1}, "str"),
        ({"command": "a\x00b"}, "command"),
        ({"command": ["a", "b\x00"]}, "command"),
        ({"command": "x", "env": {"A": "\x00"}}, "env"),
        ({"command": "x", "workdir": "/tmp/\x00"}, "workdir"),
    ],
)
def test_bad_values_are_spec_errors_naming_the_field(document, field):
    assert field in errors_of(document)


def test_numbers_beyond_the_databases_integers_are_422_not_500(tmp_path):
    app = create_app(HeadSettings(home=tmp_path, db_url=sqlite_url(tmp_path / "c.db")), run_loops=False)
    with TestClient(app) as client:
        admin = {"Authorization": f"Bearer {app.state.admin_token}"}
        response = client.get("/v1/events", params={"after": 10**20}, headers=admin)
    assert response.status_code == 422
    assert "cannot be stored or compared by the database" in response.json()["detail"][0]["msg"]
