"""An error the head did not expect still answers with Corral's JSON error body."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from corral.client.errors import CorralError, NotACorralHead, error_for
from corral.head import errors


def test_an_unexpected_error_answers_500_with_a_json_detail() -> None:
    app = FastAPI()
    errors.install(app)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error in the head (RuntimeError); see the head's log"}
    error = error_for(500, response.content, "http://127.0.0.1:1")
    assert isinstance(error, CorralError) and not isinstance(error, NotACorralHead)
    assert "internal error in the head" in str(error)
