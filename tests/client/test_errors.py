"""HTTP errors become client exceptions with readable messages and the CLI's exit codes."""

import json
import socket
import threading
import time

import pytest

from corral.client import (
    ConflictError,
    CorralError,
    HeadApi,
    InvalidRequest,
    NotAllowedError,
    NotFoundError,
    Unreachable,
)
from corral.client.errors import NothingListening, error_for
from corral.client.light import LightTransport
from corral.client.sdk import Client, HttpxTransport
from corral.head.security import Role


def body(detail) -> bytes:
    return json.dumps({"detail": detail}).encode()


@pytest.mark.parametrize(
    ("status", "kind", "exit_code"),
    [
        (400, InvalidRequest, 2),
        (422, InvalidRequest, 2),
        (404, NotFoundError, 4),
        (401, NotAllowedError, 5),
        (403, NotAllowedError, 5),
        (409, ConflictError, 1),
        (500, CorralError, 1),
        (503, CorralError, 1),
    ],
)
def test_status_codes_map_to_exceptions_and_exit_codes(status, kind, exit_code):
    error = error_for(status, body("nope"))
    assert type(error) is kind
    assert error.exit_code == exit_code
    assert error.status == status
    assert str(error) == "nope"


def test_validation_errors_name_each_field():
    detail = [
        {"loc": ["body", "resources", "gpus"], "field": "resources.gpus", "msg": "must be whole", "type": "x"},
        {"loc": ["body", "time_limit"], "field": "time_limit", "msg": "expected a duration", "type": "x"},
    ]
    error = error_for(422, body(detail))
    assert str(error) == "resources.gpus: must be whole\ntime_limit: expected a duration"
    assert error.detail == detail


def test_validation_errors_without_a_field_fall_back_to_the_location():
    error = error_for(422, body([{"loc": ["body", "jobs", 0, "command"], "msg": "Field required"}]))
    assert str(error) == "jobs.0.command: Field required"


def test_a_body_that_is_not_json_is_shown_as_text():
    error = error_for(502, b"<html>Bad Gateway</html>")
    assert type(error) is CorralError
    assert "Bad Gateway" in str(error)


def test_an_empty_body_says_the_status():
    assert str(error_for(500, b"")) == "HTTP 500"


def test_other_json_shapes_are_kept():
    assert "boom" in str(error_for(500, json.dumps({"error": "boom"}).encode()))
    assert str(error_for(404, json.dumps(["a", "b"]).encode())) == "a\nb"


@pytest.fixture(params=["light", "httpx"])
def api(request):
    """Make a HeadApi over one transport kind; httpx clients are closed after the test."""
    opened = []

    def make(url, token=""):
        if request.param == "light":
            return HeadApi(LightTransport(url, token))
        transport = HttpxTransport(url, token)
        opened.append(transport)
        return HeadApi(transport)

    yield make
    for transport in opened:
        transport.close()


def test_a_bad_spec_is_invalid_request_naming_the_field(live_head, api):
    client = api(live_head.url, live_head.admin_token)
    with pytest.raises(InvalidRequest) as info:
        client.submit({"command": "x", "resources": {"gpus": 1.5}})
    assert info.value.status == 422
    said = "must be a whole number from 0 to 64 or a fraction from 0.01 to below 1"
    assert str(info.value).startswith(f"resources.gpus: {said}")


def test_a_batch_error_names_the_job(live_head, api):
    client = api(live_head.url, live_head.admin_token)
    with pytest.raises(InvalidRequest, match=r"jobs\[1\]\.nodes: "):
        client.submit_batch([{"command": "a"}, {"command": "b", "nodes": 0}])


def test_an_unknown_job_is_not_found(live_head, api):
    client = api(live_head.url, live_head.admin_token)
    with pytest.raises(NotFoundError, match="no job 'j-missing'"):
        client.job("j-missing")


def test_an_unknown_job_is_not_found_when_streaming_logs(live_head, api):
    client = api(live_head.url, live_head.admin_token)
    with pytest.raises(NotFoundError):
        b"".join(client.logs("j-missing"))


def test_no_token_is_not_allowed(live_head, api):
    with pytest.raises(NotAllowedError) as info:
        api(live_head.url).jobs()
    assert info.value.status == 401
    assert "bearer token" in str(info.value)


def test_a_wrong_token_is_not_allowed(live_head, api):
    with pytest.raises(NotAllowedError, match="unknown or revoked token"):
        api(live_head.url, "ca_wrong").jobs()


def test_a_user_asking_for_the_join_token_is_not_allowed(live_head, api):
    token = live_head.add_token("alice", Role.USER)
    with pytest.raises(NotAllowedError) as info:
        api(live_head.url, token).join_token()
    assert info.value.status == 403
    assert "admin" in str(info.value)


def test_a_closed_port_is_unreachable_and_says_how_to_start_a_head(closed_port_url, api):
    with pytest.raises(Unreachable) as info:
        api(closed_port_url, "t").status()
    message = str(info.value)
    assert closed_port_url in message
    assert "corral up" in message
    assert info.value.exit_code == 3


def test_a_closed_port_is_unreachable_when_streaming(closed_port_url, api):
    with pytest.raises(Unreachable):
        b"".join(api(closed_port_url, "t").logs("j-x"))


def test_a_submission_where_no_head_listens_fails_at_once(closed_port_url, api):
    """Nothing listens and no head answered before: there is no head to wait for (a keyed submission
    otherwise rides out a head restart)."""
    started = time.monotonic()
    with pytest.raises(NothingListening, match="corral up") as info:
        api(closed_port_url, "t").submit({"command": "true"}, idempotency_key="k")
    assert time.monotonic() - started < 5
    assert info.value.exit_code == 3


def test_a_head_that_takes_the_connection_and_drops_it_is_unreachable_but_listening(api):
    """The request may have reached a head: a keyed submission would be sent again, so this is not
    the error for a URL where nothing listens."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def drop_each_connection() -> None:
            server.settimeout(10)
            for _ in range(2):
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                conn.recv(65536)
                conn.close()

        thread = threading.Thread(target=drop_each_connection, daemon=True)
        thread.start()
        with pytest.raises(Unreachable) as info:
            api(f"http://127.0.0.1:{port}", "t").status()
        assert not isinstance(info.value, NothingListening)
        thread.join(0)


@pytest.mark.parametrize("url", ["localhost:8470", "ftp://head:21", "http://"])
def test_a_bad_head_url_is_unreachable(url):
    with pytest.raises(Unreachable, match="bad head URL"):
        LightTransport(url)


def test_the_sdk_client_raises_the_same_errors(live_head, closed_port_url):
    with Client(live_head.url, live_head.admin_token) as client, pytest.raises(NotFoundError):
        client.job("j-missing")
    with Client(closed_port_url, "t") as client, pytest.raises(Unreachable, match="corral up"):
        client.health()
