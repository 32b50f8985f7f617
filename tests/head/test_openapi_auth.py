"""Every route of the OpenAPI schema, called without a token and with another user's token.

A route added later must be listed in ``ROUTES`` with what a stranger may do there, or this
test fails; a route that forgets its authentication fails the no-token half.
"""

import re

import pytest

PUBLIC = {("GET", "/healthz"), ("GET", "/metrics")}

# What bob (a plain user) gets on routes that concern alice's job, alice's token, a node, or the
# cluster as a whole. "refused": 401, 403 or 404 (404 where saying "exists, not yours" would leak).
# "own view": allowed, but the answer shows nothing of alice's job (the node view only says which
# job id holds each GPU: neither whose it is nor what it runs).
REFUSED, OWN_VIEW = "refused", "own view"
SHOWS_GPU_HOLDERS = {("GET", "/v1/nodes")}
SECRET = "alice-private-marker"
ROUTES = {
    ("POST", "/v1/jobs"): OWN_VIEW,
    ("GET", "/v1/jobs"): OWN_VIEW,
    ("POST", "/v1/jobs/batch"): OWN_VIEW,
    ("GET", "/v1/jobs/{job_id}"): REFUSED,
    ("POST", "/v1/jobs/{job_id}/cancel"): REFUSED,
    ("GET", "/v1/jobs/{job_id}/why"): REFUSED,
    ("POST", "/v1/jobs/{job_id}/preempt"): REFUSED,
    ("POST", "/v1/jobs/{job_id}/checkpoint"): REFUSED,
    ("POST", "/v1/jobs/cancel"): REFUSED,
    ("POST", "/v1/jobs/preempt"): REFUSED,
    ("GET", "/v1/jobs/{job_id}/logs"): REFUSED,
    ("GET", "/v1/jobs/{job_id}/gpus"): REFUSED,
    ("GET", "/v1/config"): OWN_VIEW,
    ("POST", "/v1/config/reload"): REFUSED,
    ("GET", "/v1/nodes"): OWN_VIEW,
    ("POST", "/v1/nodes/{name}/drain"): REFUSED,
    ("POST", "/v1/nodes/{name}/undrain"): REFUSED,
    ("GET", "/v1/events"): OWN_VIEW,
    ("GET", "/v1/status"): OWN_VIEW,
    ("GET", "/v1/join-token"): REFUSED,
    ("POST", "/v1/agents/register"): REFUSED,
    ("POST", "/v1/agents/{node}/heartbeat"): REFUSED,
    ("GET", "/v1/agents/{node}/desired"): REFUSED,
    ("PUT", "/v1/agents/{node}/logs/{job_id}/{generation}/{rank}"): REFUSED,
    ("GET", "/v1/usage"): OWN_VIEW,
    ("GET", "/v1/usage/series"): OWN_VIEW,
    ("GET", "/v1/whoami"): OWN_VIEW,
    ("GET", "/v1/users"): REFUSED,
    ("POST", "/v1/users"): REFUSED,
    ("GET", "/v1/tokens"): OWN_VIEW,
    ("POST", "/v1/tokens"): REFUSED,  # for alice
    ("DELETE", "/v1/tokens/{token_id}"): REFUSED,
    ("GET", "/v1/services"): OWN_VIEW,
    ("POST", "/v1/services"): OWN_VIEW,
    ("GET", "/v1/services/{name}"): REFUSED,
    ("DELETE", "/v1/services/{name}"): REFUSED,
    ("POST", "/v1/services/{name}/scale"): REFUSED,
    ("GET", "/v1/gateway/endpoints"): OWN_VIEW,
    ("POST", "/v1/gateway/load"): OWN_VIEW,
}

# Bodies that pass validation, so that a refusal comes from authorisation, not from a 422.
SERVICE = {"name": "web", "command": "python serve.py", "resources": {"gpus": 1}, "replicas": {"min": 1, "max": 1}}
BODIES = {
    ("POST", "/v1/jobs"): {"command": "sleep 1"},
    ("POST", "/v1/jobs/batch"): {"jobs": [{"command": "sleep 1"}]},
    ("POST", "/v1/jobs/cancel"): {"ids": ["{job_id}"]},
    ("POST", "/v1/jobs/preempt"): {"ids": ["{job_id}"]},
    ("POST", "/v1/jobs/{job_id}/checkpoint"): {},
    ("POST", "/v1/nodes/{name}/drain"): {"reason": "x"},
    ("POST", "/v1/agents/register"): {
        "name": "n9",
        "gpus": [],
        "cpus": 1,
        "memory_mb": 1024,
        "advertise_addr": "10.0.0.9",
        "gpu_source": "fake",
    },
    ("POST", "/v1/agents/{node}/heartbeat"): {"tasks": [], "applied_version": 0},
    ("POST", "/v1/users"): {"name": "mallory", "role": "admin"},
    ("POST", "/v1/tokens"): {"user": "alice"},
    ("POST", "/v1/services"): SERVICE,
    ("POST", "/v1/services/{name}/scale"): {"replicas": 0},
    ("POST", "/v1/gateway/load"): {"gateway": "g1", "services": {}},
}


def routes(app):
    for path, methods in app.openapi()["paths"].items():
        for method in methods:
            yield method.upper(), path


@pytest.fixture
def world(head):
    """alice with a running job, a token and a service; bob a stranger; a node with a credential."""
    for name in ("alice", "bob"):
        response = head.client.post("/v1/users", json={"name": name}, headers=head.admin)
        assert response.status_code == 201, response.text
    alice = head.client.post("/v1/tokens", json={"user": "alice"}, headers=head.admin).json()
    bob = head.client.post("/v1/tokens", json={"user": "bob"}, headers=head.admin).json()["token"]
    agent = head.register("n1", gpus=2)
    spec = {"command": f"sleep 100 # {SECRET}", "resources": {"gpus": 1}, "env": {"NOTE": SECRET}}
    job = head.submit(spec, token=alice["token"])["id"]
    head.cycle()
    agent.run_all()
    service = head.client.post("/v1/services", json=SERVICE, headers=head.auth(alice["token"]))
    assert service.status_code in (200, 201), service.text
    values = {"job_id": job, "name": "web", "node": "n1", "token_id": alice["id"], "generation": "0", "rank": "0"}
    return {"alice": alice, "bob": bob, "job": job, "values": values}


def fill(path, values):
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def call(head, method, path, values, token):
    url = fill(path, {**values, "name": "n1"} if path.startswith("/v1/nodes/") else values)
    body = BODIES.get((method, path))
    if body is not None:
        body = {k: ([fill(x, values) for x in v] if k == "ids" else v) for k, v in body.items()}
    headers = head.auth(token) if token else {}
    if method == "PUT":
        return head.client.put(url, content=b"x", headers=headers)
    return head.client.request(method, url, json=body, headers=headers, params={"wait": 0} if "desired" in path else {})


def test_every_route_is_classified(head):
    unknown = sorted(set(routes(head.app)) - set(ROUTES) - PUBLIC)
    assert unknown == [], f"classify these routes in ROUTES (and protect them): {unknown}"


def test_every_route_needs_a_token(head, world):
    for method, path in routes(head.app):
        if (method, path) in PUBLIC:
            continue
        response = call(head, method, path, world["values"], token=None)
        assert response.status_code == 401, (method, path, response.status_code, response.text[:200])
        bad = call(head, method, path, world["values"], token="cu_not_a_real_token")
        # Agent routes check the node's own credential: a wrong one is refused with 403.
        expected = (401, 403) if path.startswith("/v1/agents/{node}") else (401,)
        assert bad.status_code in expected, (method, path, bad.status_code, bad.text[:200])


def test_another_user_can_neither_touch_nor_see_alices_work(head, world):
    for method, path in routes(head.app):
        if (method, path) in PUBLIC:
            continue
        response = call(head, method, path, world["values"], token=world["bob"])
        where = (method, path, response.status_code, response.text[:300])
        if ROUTES[(method, path)] == REFUSED:
            assert response.status_code in (401, 403, 404), where
        else:
            assert response.status_code < 500, where
            assert SECRET not in response.text, where
            assert (method, path) in SHOWS_GPU_HOLDERS or world["job"] not in response.text, where
            assert world["alice"]["token"] not in response.text, where
    job = head.job(world["job"])
    assert (job["state"], job["preemptions"]) == ("RUNNING", 0)
    assert head.client.get("/v1/whoami", headers=head.auth(world["alice"]["token"])).status_code == 200
