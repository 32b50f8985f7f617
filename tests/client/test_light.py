"""The client against a real head over HTTP, and where it finds the head and its token."""

import json

import httpx
import pytest

from corral.client import ClientConfig, HeadApi, Unreachable, corral_home, load_config
from corral.client.errors import InvalidRequest
from corral.client.light import LightTransport
from corral.client.sdk import Client, HttpxTransport


@pytest.fixture(params=["light", "httpx"])
def client(request, live_head):
    if request.param == "light":
        yield HeadApi(LightTransport(live_head.url, live_head.admin_token))
    else:
        transport = HttpxTransport(live_head.url, live_head.admin_token)
        yield HeadApi(transport)
        transport.close()


def test_health(client):
    assert client.health()["status"] == "ok"


def test_submit_show_list_and_cancel(client):
    job = client.submit({"name": "train", "command": ["python", "train.py"], "env": {"EPOCHS": 3}})
    assert job["state"] == "PENDING"
    assert job["env"] == {"EPOCHS": "3"}
    assert client.job(job["id"])["name"] == "train"
    assert job["id"] in [j["id"] for j in client.jobs(states=["PENDING"])]
    cancelled = client.cancel([job["id"]])
    assert [j["state"] for j in cancelled] == ["CANCELLED"]
    assert job["id"] in [j["id"] for j in client.jobs(include_all=True, states=["CANCELLED"])]
    assert job["id"] not in [j["id"] for j in client.jobs(states=["PENDING"])]


def test_an_idempotency_key_returns_the_same_job(client):
    first = client.submit({"command": "x"}, idempotency_key=f"key-{id(client)}")
    second = client.submit({"command": "x"}, idempotency_key=f"key-{id(client)}")
    assert first["id"] == second["id"]


def test_batch_submit(client):
    ids = client.submit_batch([{"command": "a"}, {"command": "b"}])
    assert len(ids) == 2
    client.cancel(ids)


def test_status_nodes_and_join_token(client, live_head):
    status = client.status()
    assert status["head_url"] == live_head.url
    assert {"nodes_ready", "nodes_total", "gpus_free", "gpus_total"} <= set(status)
    assert isinstance(client.nodes(), list)
    assert client.join_token().startswith("cj_")


def test_logs_stream_what_the_agent_shipped(client, live_head, request):
    join = client.join_token()
    name = f"log-node-{request.node.callspec.id}"  # a node of its own per transport: a live node is not taken over
    with httpx.Client(base_url=live_head.url) as http:
        node = http.post(
            "/v1/agents/register",
            json={"name": name, "cpus": 1, "memory_mb": 1},
            headers={"Authorization": f"Bearer {join}"},
        ).json()
        job = client.submit({"command": "echo hello"})
        shipped = http.put(
            f"/v1/agents/{name}/logs/{job['id']}/0/0",
            params={"offset": 0},
            content=b"hello\nworld\n",
            headers={"Authorization": f"Bearer {node['node_token']}"},
        )
        assert shipped.json() == {"size": 12}
    assert b"".join(client.logs(job["id"])) == b"hello\nworld\n"
    assert b"".join(client.logs(job["id"], offset=6)) == b"world\n"
    client.cancel([job["id"]])


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in ("CORRAL_HEAD", "CORRAL_TOKEN", "CORRAL_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    return monkeypatch


def write_config(home, **values):
    home.mkdir(parents=True, exist_ok=True)
    (home / "client.json").write_text(json.dumps(values))


def test_config_comes_from_corral_home(env, tmp_path):
    write_config(tmp_path / "ch", head_url="http://file:1/", token="file-token")
    env.setenv("CORRAL_HOME", str(tmp_path / "ch"))
    assert load_config() == ClientConfig(head_url="http://file:1", token="file-token")


def test_environment_overrides_the_config_file(env, tmp_path):
    write_config(tmp_path / "ch", head_url="http://file:1", token="file-token")
    env.setenv("CORRAL_HOME", str(tmp_path / "ch"))
    env.setenv("CORRAL_HEAD", "http://env:2")
    env.setenv("CORRAL_TOKEN", "env-token")
    assert load_config() == ClientConfig(head_url="http://env:2", token="env-token")


def test_each_setting_is_overridden_on_its_own(env, tmp_path):
    write_config(tmp_path / "ch", head_url="http://file:1", token="file-token")
    env.setenv("CORRAL_HOME", str(tmp_path / "ch"))
    env.setenv("CORRAL_TOKEN", "env-token")
    assert load_config() == ClientConfig(head_url="http://file:1", token="env-token")
    env.delenv("CORRAL_TOKEN")
    env.setenv("CORRAL_HEAD", "http://env:2")
    assert load_config() == ClientConfig(head_url="http://env:2", token="file-token")


def test_the_environment_alone_is_enough(env):
    env.setenv("CORRAL_HEAD", "http://env:2")
    assert load_config() == ClientConfig(head_url="http://env:2", token="")


def test_corral_home_defaults_to_dot_corral(env, tmp_path):
    assert corral_home() == tmp_path / "user-home" / ".corral"
    write_config(tmp_path / "user-home" / ".corral", head_url="http://default:3", token="t")
    assert load_config().head_url == "http://default:3"


def test_nothing_configured_is_unreachable_and_says_how_to_start(env):
    with pytest.raises(Unreachable) as info:
        load_config()
    assert "corral up" in str(info.value)
    assert "CORRAL_HEAD" in str(info.value)
    assert info.value.exit_code == 3


@pytest.mark.parametrize("content", ["not json", "[1, 2]", ""])
def test_a_broken_config_file_is_bad_usage_naming_the_file(env, tmp_path, content):
    (tmp_path / "ch").mkdir()
    (tmp_path / "ch" / "client.json").write_text(content)
    env.setenv("CORRAL_HOME", str(tmp_path / "ch"))
    with pytest.raises(InvalidRequest) as info:
        load_config()
    assert str(tmp_path / "ch" / "client.json") in str(info.value)
    assert info.value.exit_code == 2


def test_the_config_a_head_writes_lets_the_sdk_connect(env, live_head):
    env.setenv("CORRAL_HOME", str(live_head.home))
    with Client() as client:
        assert client.status()["head_url"] == live_head.url
        assert client.join_token()  # the config holds the admin token


def test_an_explicit_token_wins_over_the_config(env, live_head):
    env.setenv("CORRAL_HOME", str(live_head.home))
    with Client(token="ca_wrong") as client, pytest.raises(Exception, match="unknown or revoked token"):
        client.jobs()


def test_an_empty_name_is_not_found_without_asking_the_head(client):
    from corral.client.errors import NotFoundError

    for call in (client.job, client.why):
        with pytest.raises(NotFoundError, match="empty name"):
            call("")


def test_a_server_that_is_not_a_corral_head_is_unreachable(tmp_path):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        api = HeadApi(LightTransport(url, "token"))
        with pytest.raises(Unreachable, match="is it a Corral head"):
            api.jobs()
        with pytest.raises(Unreachable, match="is it a Corral head"):
            api.submit({"command": "x"})
    finally:
        server.shutdown()
        server.server_close()


def test_run_with_gpu_type_repeated_keeps_every_type_in_order(live_head, monkeypatch, capsys):
    from corral.cli.main import main

    monkeypatch.setenv("CORRAL_HOME", str(live_head.home))
    monkeypatch.setenv("CORRAL_HEAD", live_head.url)
    monkeypatch.setenv("CORRAL_TOKEN", live_head.admin_token)
    join = HeadApi(LightTransport(live_head.url, live_head.admin_token)).join_token()
    with httpx.Client(base_url=live_head.url) as http:  # a node with one of the types, so the job may run
        gpus = [{"index": 0, "type": "A100", "memory_mb": 40960}]
        body = {"name": "a100-node", "cpus": 1, "memory_mb": 1, "gpus": gpus}
        registered = http.post("/v1/agents/register", json=body, headers={"Authorization": f"Bearer {join}"})
        assert registered.status_code in (200, 201), registered.text
    main(["run", "--gpus", "1", "--gpu-type", "H100", "--gpu-type", "L4,A100", "-o", "json", "--", "true"])
    job_id = json.loads(capsys.readouterr().out)["id"]
    job = HeadApi(LightTransport(live_head.url, live_head.admin_token)).job(job_id)
    assert job["gpu_types"] == ["H100", "L4", "A100"]
