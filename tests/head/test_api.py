"""The head's HTTP surface: validation errors with field paths, 404s, authentication and roles."""

import pytest

from corral.head.security import Role


def post_job(head, body, token=None):
    return head.client.post("/v1/jobs", json=body, headers=head.auth(token or head.admin_token))


def fields(response) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {d["field"]: d["msg"] for d in response.json()["detail"]}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"command": "x", "resources": {"gpus": 1.5}}, "resources.gpus", "a fraction from 0.01 to below 1"),
        ({"command": "x", "resources": {"gpus": -1}}, "resources.gpus", "must be a whole number from 0 to 64"),
        ({"command": "x", "resources": {"memory": "lots"}}, "resources.memory", "expected a size such as"),
        ({"command": "x", "resources": {"gpu_type": ["A", "A"]}}, "resources.gpu_type", "twice"),
        ({"command": "x", "resources": {"gpu": 1}}, "resources.gpu", "unknown field"),
        ({"command": "x", "time_limit": "soon"}, "time_limit", "expected a duration such as"),
        ({"command": "x", "env": {"1X": "a"}}, "env", "bad variable name '1X'"),
        ({"command": "x", "launcher": "mpi"}, "launcher", "per-gpu"),
        ({"command": "", "nodes": 1}, "command", "must not be empty"),
        ({"nodes": 2}, "command", "required"),
    ],
)
def test_bad_job_bodies_answer_422_with_field_paths(head, body, field, words):
    got = fields(post_job(head, body))
    assert field in got, got
    assert words.lower() in got[field].lower()


def test_validation_messages_drop_the_pydantic_prefix(head):
    got = fields(post_job(head, {"command": "x", "resources": {"gpus": 1.5}}))
    assert got["resources.gpus"].startswith("must be a whole number")


def test_422_detail_keeps_the_location(head):
    detail = post_job(head, {"command": "x", "resources": {"gpus": 1.5}}).json()["detail"][0]
    assert detail["loc"] == ["body", "resources", "gpus"]
    assert detail["type"]


def test_nothing_is_stored_for_a_refused_job(head):
    post_job(head, {"command": "x", "resources": {"gpus": 1.5}})
    assert head.jobs() == []


def test_unknown_job_is_404(head):
    for method, path in [("GET", "/v1/jobs/j-nope"), ("POST", "/v1/jobs/j-nope/cancel")]:
        response = head.client.request(method, path, headers=head.admin)
        assert response.status_code == 404, (method, path)
        assert "j-nope" in response.json()["detail"]


def test_cancelling_several_jobs_with_one_unknown_is_404_and_cancels_none(head):
    job = head.submit({"command": "x"})
    response = head.client.post("/v1/jobs/cancel", json={"ids": [job["id"], "j-nope"]}, headers=head.admin)
    assert response.status_code == 404
    assert head.job(job["id"])["state"] == "PENDING"


def test_cancelling_with_unknown_ids_names_every_one_of_them(head):
    job = head.submit({"command": "x"})
    ids = ["j-nope", job["id"], "j-gone"]
    response = head.client.post("/v1/jobs/cancel", json={"ids": ids}, headers=head.admin)
    assert response.status_code == 404
    assert response.json()["detail"] == "no jobs 'j-nope', 'j-gone'; none of the 3 jobs given was cancelled"
    assert head.job(job["id"])["state"] == "PENDING"


def test_a_limit_drops_finished_jobs_before_queued_ones(head):
    waiting = head.submit({"command": "x"})
    ended = [head.submit({"command": "x"}) for _ in range(3)]
    head.client.post("/v1/jobs/cancel", json={"ids": [j["id"] for j in ended]}, headers=head.admin)
    listed = head.client.get("/v1/jobs", params={"all": "true", "limit": 2}, headers=head.admin).json()
    assert [j["id"] for j in listed] == [waiting["id"], ended[-1]["id"]]  # in submit order


def test_unknown_state_filter_is_422_listing_states(head):
    response = head.client.get("/v1/jobs", params={"state": "DONE"}, headers=head.admin)
    got = fields(response)
    assert "SUCCEEDED" in got["state"]
    assert response.json()["detail"][0]["loc"] == ["query", "state"]  # a query parameter, not the body


def test_unknown_node_is_404(head):
    token = head.register("n1").token
    for method, path in [("POST", "/v1/agents/ghost/heartbeat"), ("GET", "/v1/agents/ghost/desired")]:
        response = head.client.request(method, path, json={"tasks": []}, headers=head.auth(token))
        assert response.status_code == 404, (method, path)
        assert "ghost" in response.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/jobs"),
        ("POST", "/v1/jobs"),
        ("GET", "/v1/nodes"),
        ("GET", "/v1/status"),
        ("GET", "/v1/join-token"),
        ("POST", "/v1/agents/register"),
        ("POST", "/v1/agents/n1/heartbeat"),
        ("GET", "/v1/agents/n1/desired"),
    ],
)
def test_missing_token_is_401(head, method, path):
    response = head.client.request(method, path, json={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "bearer token" in response.json()["detail"]


@pytest.mark.parametrize("header", ["Bearer nonsense", "Basic dXNlcjpwYXNz", "Bearer ", "nonsense"])
def test_bad_token_is_401(head, header):
    response = head.client.get("/v1/jobs", headers={"Authorization": header})
    assert response.status_code == 401


def test_healthz_needs_no_token(head):
    response = head.client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_a_user_token_cannot_fetch_the_join_token(head):
    response = head.client.get("/v1/join-token", headers=head.auth(head.user_token()))
    assert response.status_code == 403
    assert "admin" in response.json()["detail"]


def test_a_user_token_cannot_register_a_node(head):
    body = {"name": "n1", "cpus": 1, "memory_mb": 1}
    response = head.client.post("/v1/agents/register", json=body, headers=head.auth(head.user_token()))
    assert response.status_code == 403
    assert "join token" in response.json()["detail"]


def test_an_admin_token_may_register_a_node(head):
    body = {"name": "n1", "cpus": 1, "memory_mb": 1}
    response = head.client.post("/v1/agents/register", json=body, headers=head.admin)
    assert response.status_code == 200


def test_the_join_token_cannot_act_on_jobs(head):
    response = head.client.get("/v1/jobs", headers=head.auth(head.join_token()))
    assert response.status_code == 403
    assert "join token" in response.json()["detail"]


def test_a_user_sees_and_cancels_only_their_own_jobs(head):
    alice, bob = head.user_token("alice"), head.user_token("bob")
    mine = head.submit({"command": "x"}, token=alice)
    theirs = head.submit({"command": "y"}, token=bob)
    assert mine["user"] == "alice"

    listed = head.client.get("/v1/jobs", headers=head.auth(alice)).json()
    assert [j["id"] for j in listed] == [mine["id"]]
    assert head.client.get(f"/v1/jobs/{theirs['id']}", headers=head.auth(alice)).status_code == 404
    assert head.client.post(f"/v1/jobs/{theirs['id']}/cancel", headers=head.auth(alice)).status_code == 404
    assert head.job(theirs["id"])["state"] == "PENDING"

    assert head.client.post(f"/v1/jobs/{mine['id']}/cancel", headers=head.auth(alice)).json()["state"] == "CANCELLED"
    assert {j["id"] for j in head.jobs()} == {mine["id"], theirs["id"]}  # an admin sees everyone's


def test_a_node_credential_is_not_a_user_token(head):
    agent = head.register("n1")
    assert head.client.get("/v1/jobs", headers=head.auth(agent.token)).status_code == 401


def test_a_node_token_only_works_for_its_own_node(head):
    first, second = head.register("n1"), head.register("n2")
    response = head.client.post("/v1/agents/n2/heartbeat", json={"tasks": []}, headers=head.auth(first.token))
    assert response.status_code == 403
    assert "register again" in response.json()["detail"]
    assert second.heartbeat().status_code == 200


def test_bad_agent_bodies_answer_422_with_field_paths(head):
    body = {"name": "bad name!", "cpus": -1, "memory_mb": 1, "gpus": [{"index": -1, "type": "", "memory_mb": 1}]}
    got = fields(head.client.post("/v1/agents/register", json=body, headers=head.auth(head.join_token())))
    assert {"name", "cpus", "gpus[0].index", "gpus[0].type"} <= set(got)

    agent = head.register("n1")
    bad = {"tasks": [{"task_id": "t", "generation": 0, "state": "SLEEPING"}]}
    response = head.client.post("/v1/agents/n1/heartbeat", json=bad, headers=head.auth(agent.token))
    assert "tasks[0].state" in fields(response)


def test_the_join_token_is_stable_and_written_to_the_client_config(head):
    import json

    config = json.loads((head.home / "client.json").read_text())
    assert config["token"] == head.admin_token
    assert config["join_token"] == head.join_token() == head.join_token()
    assert config["head_url"] == "http://127.0.0.1:8470"
    assert (head.home / "client.json").stat().st_mode & 0o077 == 0


def test_roles_are_what_the_token_table_says(head):
    token = head.user_token("carol", role=Role.ADMIN)
    assert head.client.get("/v1/join-token", headers=head.auth(token)).status_code == 200


def test_status_counts_nodes_gpus_and_jobs(head):
    head.register("n1", gpus=8)
    head.register("n2", gpus=2, gpu_type="L4")
    head.submit({"command": "x", "resources": {"gpus": 4, "gpu_type": "H100"}})
    head.cycle()
    status = head.client.get("/v1/status", headers=head.admin).json()
    assert status["nodes_ready"] == status["nodes_total"] == 2
    assert status["gpus_total"] == 10
    assert status["gpus_free"] == 6
    assert status["gpus_by_type"] == {"H100": {"free": 4, "total": 8}, "L4": {"free": 2, "total": 2}}
    assert status["jobs_by_state"]["PENDING"] == 1
    assert status["head_url"] == "http://127.0.0.1:8470"


def test_cancel_says_which_jobs_had_already_ended(head):
    job = head.submit({"command": "sleep 60"})
    first = head.client.post("/v1/jobs/cancel", json={"ids": [job["id"]]}, headers=head.admin).json()
    assert [(j["state"], j["already_ended"]) for j in first] == [("CANCELLED", False)]
    again = head.client.post(f"/v1/jobs/{job['id']}/cancel", headers=head.admin).json()
    assert (again["state"], again["already_ended"]) == ("CANCELLED", True)


@pytest.mark.parametrize(("labels", "said"), [({"rack": "r 1"}, "bad value 'r 1'"), ({"rack": ""}, "has no value")])
def test_a_registration_with_a_bad_label_is_refused_naming_it(head, labels, said):
    body = {"name": "n1", "cpus": 1, "memory_mb": 1, "labels": labels}
    response = head.client.post("/v1/agents/register", json=body, headers=head.admin)
    assert response.status_code == 422
    assert said in response.text and "labels" in response.text
