"""Settings the client cannot use are refused before any request, naming where they came from; a
server that answers without Corral's error body is not taken for a Corral head."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from corral.cli.main import main
from corral.client import HeadApi, InvalidRequest, NotFoundError, load_config
from corral.client.config import head_url_problem
from corral.client.errors import NotACorralHead, error_for
from corral.client.light import LightTransport
from corral.client.retry import retriable
from corral.client.sdk import Client, HttpxTransport
from corral.testing.net import free_port

BAD_TOKENS = ["a\nb", "ключ", "a\x7fb", "a b", "tab\there", "ca_\r\n", "é"]


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in ("CORRAL_HEAD", "CORRAL_TOKEN", "CORRAL_JOIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path / "home"))
    return monkeypatch


def exit_code(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    return int(ended.value.code or 0), capsys.readouterr().err


# --- tokens ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_a_token_that_cannot_be_sent_is_bad_usage_naming_corral_token(token, env, capsys, closed_port_url):
    """Nothing listens at the head URL: reaching it would exit 3, so exit 2 means no request was made."""
    env.setenv("CORRAL_HEAD", closed_port_url)
    env.setenv("CORRAL_TOKEN", token)
    code, err = exit_code(["status"], capsys)
    assert code == 2, err
    assert "CORRAL_TOKEN" in err and "printable ASCII without spaces" in err
    assert "Traceback" not in err
    assert len(token) == 1 or token not in err  # the character is named, not the secret


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_corral_token_is_bad_usage_not_the_client_configs_token(empty, env, capsys, closed_port_url, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "client.json").write_text(json.dumps({"head_url": closed_port_url, "token": "ca_admin"}))
    env.setenv("CORRAL_TOKEN", empty)  # set to drop the admin token: never used in its place
    code, err = exit_code(["jobs"], capsys)
    assert code == 2, err
    assert "CORRAL_TOKEN is set but empty" in err


def test_a_bad_token_in_the_client_config_names_the_file(env, capsys, closed_port_url, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "client.json").write_text(json.dumps({"head_url": closed_port_url, "token": "ca_\nrest"}))
    code, err = exit_code(["jobs"], capsys)
    assert code == 2, err
    assert f"token in {home / 'client.json'}" in err and "printable ASCII" in err


def test_tokens_the_head_issues_are_accepted(env, live_head):
    env.setenv("CORRAL_HEAD", live_head.url)
    env.setenv("CORRAL_TOKEN", live_head.admin_token)
    assert load_config().token == live_head.admin_token
    assert HeadApi(LightTransport(live_head.url, live_head.admin_token)).whoami()


@pytest.mark.parametrize("token", ["a\nb", "ключ", "a\x7fb"])
@pytest.mark.parametrize("transport", [LightTransport, HttpxTransport])
def test_a_transport_refuses_a_token_it_cannot_send(token, transport, closed_port_url):
    with pytest.raises(InvalidRequest, match=r"^token: .*printable ASCII without spaces"):
        transport(closed_port_url, token)


def test_the_sdk_client_refuses_a_token_it_cannot_send(closed_port_url):
    with pytest.raises(InvalidRequest, match="token"):
        Client(closed_port_url, "ключ")


# --- error responses without Corral's body ----------------------------------------------------------


class _Foreign(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status and body the test set on the server."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        status, body = self.server.reply  # type: ignore[attr-defined]
        self.server.hits += 1  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def foreign() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    server.reply = (404, b"")  # type: ignore[attr-defined]
    server.hits = 0  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize("argv", [["status"], ["show", "j-abc"], ["jobs"], ["cancel", "j-abc"]])
def test_an_empty_404_is_not_a_corral_head(argv, foreign, env, capsys):
    env.setenv("CORRAL_HEAD", foreign.url)
    env.setenv("CORRAL_TOKEN", "t")
    code, err = exit_code(argv, capsys)
    assert code == 3, err
    assert "HTTP 404 with an empty body" in err and "is it a Corral head?" in err and "CORRAL_HEAD" in err


def test_a_submission_to_a_server_that_is_not_a_corral_head_is_not_sent_again(foreign, env, capsys):
    env.setenv("CORRAL_HEAD", foreign.url)
    env.setenv("CORRAL_TOKEN", "t")
    started = time.monotonic()
    code, err = exit_code(["run", "--", "true"], capsys)
    assert code == 3, err
    assert "is it a Corral head?" in err
    assert foreign.hits == 1 and time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, b""),
        (404, b"   "),
        (401, b""),
        (403, b"Forbidden"),
        (422, b"[1, 2]"),
        (409, b'{"error": "taken"}'),
        (500, b"Internal Server Error"),
        (502, b"<html>Bad Gateway</html>"),
    ],
)
@pytest.mark.parametrize("transport", [LightTransport, HttpxTransport])
def test_any_error_without_corrals_json_body_is_not_a_corral_head(status, body, transport, foreign):
    foreign.reply = (status, body)
    api = HeadApi(transport(foreign.url, "t"))
    try:
        with pytest.raises(NotACorralHead, match=f"answered HTTP {status} with .*is it a Corral head") as info:
            api.job("j-abc")
        assert info.value.exit_code == 3 and info.value.status == status
        with pytest.raises(NotACorralHead):
            b"".join(api.logs("j-abc"))
    finally:
        if isinstance(api.transport, HttpxTransport):
            api.transport.close()


def test_corrals_json_error_body_keeps_its_meaning(foreign):
    foreign.reply = (404, json.dumps({"detail": "no job 'j-abc'"}).encode())
    with pytest.raises(NotFoundError, match="no job 'j-abc'"):
        HeadApi(LightTransport(foreign.url, "t")).job("j-abc")


def test_a_foreign_refusal_is_not_repeated_but_a_foreign_server_error_is():
    assert not retriable(error_for(404, b"", "http://h:1"), LightTransport("http://h:1"))
    assert retriable(error_for(502, b"<html/>", "http://h:1"), LightTransport("http://h:1"))


def test_without_a_head_url_bodies_are_read_as_before():
    assert type(error_for(404, b"")) is NotFoundError
    assert str(error_for(500, b"")) == "HTTP 500"


# --- head URLs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:18457/extra/path", "a path ('/extra/path')"),
        ("http://127.0.0.1:18457/v1", "a path ('/v1')"),
        ("http://127.0.0.1:18457//", "a path ('//')"),
        ("http://127.0.0.1:18457?x=1", "a query"),
        ("http://127.0.0.1:18457/?x=1", "a query"),
        ("http://127.0.0.1:18457?", "a query"),
        ("http://127.0.0.1:18457#top", "a fragment"),
        ("https://head:8470/a?b#c", "a path ('/a') and a query (?…) and a fragment"),
    ],
)
def test_a_head_url_with_more_than_host_and_port_is_bad_usage_naming_corral_head(url, says, env, capsys):
    env.setenv("CORRAL_HEAD", url)
    code, err = exit_code(["status"], capsys)
    assert code == 2, err
    assert "CORRAL_HEAD" in err and f"bad head URL {url!r}" in err and says in err
    assert "http://HOST:PORT" in err


@pytest.mark.parametrize("url", ["http://user:s3cret@127.0.0.1:18457", "http://user@127.0.0.1:18457/"])
def test_a_head_url_with_user_info_is_refused_without_repeating_it(url, env, capsys):
    env.setenv("CORRAL_HEAD", url)
    code, err = exit_code(["status"], capsys)
    assert code == 2, err
    assert "CORRAL_HEAD" in err and "user name or password" in err
    assert "s3cret" not in err and "user@" not in err


def test_a_head_url_with_a_path_in_the_client_config_names_the_file(env, capsys, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "client.json").write_text(json.dumps({"head_url": "http://h:1/api", "token": "t"}))
    code, err = exit_code(["status"], capsys)
    assert code == 2, err
    assert f"head_url in {home / 'client.json'}" in err and "a path ('/api')" in err


@pytest.mark.parametrize(
    "url", ["http://h:1", "http://h:1/", "https://h", "https://h/", "http://[::1]:8470/", "http://10.0.0.1:8470"]
)
def test_host_and_port_with_an_optional_trailing_slash_are_fine(url):
    assert head_url_problem(url) is None


def test_several_heads_are_each_checked(env, capsys):
    env.setenv("CORRAL_HEAD", "http://h1:1,http://h2:2/path")
    code, err = exit_code(["status"], capsys)
    assert code == 2 and "CORRAL_HEAD" in err and "'http://h2:2/path'" in err


def test_an_agent_refuses_a_head_url_with_a_path(tmp_path):
    argv = ["agent", "--head", f"http://127.0.0.1:{free_port()}/x", "--token", "t", "--runtime", "none"]
    env = {**os.environ, "CORRAL_HOME": str(tmp_path)}
    try:  # in a process of its own: an agent that started would keep trying to register
        done = subprocess.run(
            [sys.executable, "-m", "corral", *argv], capture_output=True, text=True, env=env, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the agent started with a head URL that has a path")
    assert done.returncode == 2, done.stderr
    assert "--head" in done.stderr and "a path ('/x')" in done.stderr


def test_the_client_never_reaches_a_head_named_with_a_path(env, live_head):
    env.setenv("CORRAL_HEAD", live_head.url + "/extra/path")
    with pytest.raises(InvalidRequest, match="CORRAL_HEAD"):
        load_config()
    env.setenv("CORRAL_HEAD", live_head.url + "/")
    assert load_config().head_url == live_head.url
