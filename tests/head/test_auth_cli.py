"""`corral user` and `corral token` against a real head served over HTTP on a free port."""

import json
import threading
import time

import pytest
import uvicorn

from corral.cli.main import main
from corral.head.app import create_app
from corral.head.settings import HeadSettings
from corral.head.store.db import sqlite_url
from corral.testing.net import free_port


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    home = tmp_path_factory.mktemp("head")
    port = free_port()
    settings = HeadSettings(home=home, db_url=sqlite_url(home / "corral.db"), port=port)
    app = create_app(settings, run_loops=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the head did not start"
        time.sleep(0.01)
    try:
        yield settings.url, app.state.admin_token
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def corral(live, monkeypatch, capsys, tmp_path):
    url, admin = live
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.setenv("CORRAL_HEAD", url)

    def run(*args, token=admin):
        monkeypatch.setenv("CORRAL_TOKEN", token)
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code or 0
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_user_add_list_token_create_and_revoke(corral):
    code, out, _ = corral("user", "add", "dana", "--team", "vision", "--team", "nlp", "-o", "json")
    assert code == 0
    assert json.loads(out)["teams"] == ["vision", "nlp"]
    code, out, _ = corral("user", "list")
    assert code == 0 and "dana" in out and "vision, nlp" in out
    code, out, err = corral("token", "create", "--user", "dana", "--name", "laptop")
    assert code == 0
    token = out.strip()
    assert token.startswith("cu_") and "corral token revoke" in err
    code, out, _ = corral("whoami", "-o", "json", token=token)
    assert json.loads(out) == {"user": "dana", "role": "user", "teams": ["vision", "nlp"]}
    code, out, _ = corral("token", "list", "-o", "json", token=token)
    (mine,) = json.loads(out)
    assert mine["name"] == "laptop" and "token" not in mine
    assert corral("token", "revoke", mine["id"], token=token)[0] == 0
    code, _, err = corral("jobs", token=token)
    assert code != 0 and "revoked" in err


def test_a_plain_user_cannot_add_users(corral):
    corral("user", "add", "erin")
    token = corral("token", "create", "--user", "erin")[1].strip()
    code, _, err = corral("user", "add", "mallory", "--role", "admin", token=token)
    assert code != 0
    assert "only an admin" in err


def test_a_bad_user_name_exits_2_naming_the_field(corral):
    code, _, err = corral("user", "add", "has space")
    assert code == 2
    assert "name" in err


def test_revoking_an_unknown_token_says_so(corral):
    code, _, err = corral("token", "revoke", "0123456789ab")
    assert code != 0
    assert "no token '0123456789ab'" in err
