"""Services through the head's API: replicas are jobs, kept at the desired count by the serve loop."""

from corral.head.services import serving, serving_loop
from corral.serve.autoscale import LoadSample

SERVICE = {
    "name": "echo",
    "command": "python serve.py",
    "resources": {"gpus": 1},
    "replicas": {"min": 2, "max": 4},
    "readiness": {"path": "/ready"},
    "priority": 50,
}


def create(head, spec=None, token=None, expect=201):
    response = head.client.post("/v1/services", json=spec or SERVICE, headers=head.auth(token or head.admin_token))
    assert response.status_code == expect, response.text
    return response.json()


def show(head, name="echo"):
    response = head.client.get(f"/v1/services/{name}", headers=head.admin)
    assert response.status_code == 200, response.text
    return response.json()


def serve_round(head, probes=None, windows=None, inflight=None):
    services = serving_loop.load(head.rt)
    serving_loop.reconcile(head.rt, services, windows or {}, probes or {}, inflight)


def start_replicas(head, agent, port=9000):
    """Schedule, then report every desired task running on a port of its own."""
    head.cycle()
    desired = agent.desired()
    agent.applied = desired["version"]
    reports = [{**head.running(t), "master_port": port + i} for i, t in enumerate(desired["tasks"])]
    agent.beat(reports)
    return reports


def replica_jobs(head):
    return [j for j in head.jobs() if j["env"].get("CORRAL_SERVICE") == "echo"]


def test_a_service_runs_its_minimum_of_replicas_as_jobs(head):
    head.register("n1")
    out = create(head)
    assert out["replicas_desired"] == 2 and out["revision"] == 1
    assert out["url"].endswith("/s/echo/")
    serve_round(head)
    jobs = replica_jobs(head)
    assert len(jobs) == 2
    assert {j["priority"] for j in jobs} == {50}
    assert {j["gpus_per_node"] for j in jobs} == {1}
    assert all(j["env"]["CORRAL_SERVICE_REVISION"] == "1" for j in jobs)
    serve_round(head)
    assert len(replica_jobs(head)) == 2  # reconciling again changes nothing


def test_replicas_that_cannot_be_placed_give_the_service_their_reason(head):
    head.register("n1", gpus=1)
    create(head)
    serve_round(head)
    head.cycle()  # one replica takes the only GPU; the other waits
    out = show(head)
    assert out["replicas_ready"] == 0 and out["replicas_desired"] == 2
    assert out["reason"].startswith("1 replica not placed yet: waiting for 1 node with 1 free GPU"), out["reason"]


def test_replicas_become_ready_when_their_probe_passes(head):
    agent = head.register("n1", addr="127.0.0.9")
    create(head)
    serve_round(head)
    start_replicas(head, agent)
    service = show(head)
    urls = {r["url"] for r in service["replicas"]}
    assert urls == {"http://127.0.0.9:9000", "http://127.0.0.9:9001"}
    assert service["replicas_ready"] == 0
    by_url = {r["url"]: r["job_id"] for r in service["replicas"]}
    first, second = by_url["http://127.0.0.9:9000"], by_url["http://127.0.0.9:9001"]
    serve_round(head, probes={first: True, second: False})
    assert show(head)["replicas_ready"] == 1
    view = head.client.get("/v1/gateway/endpoints", headers=head.admin).json()
    (echo,) = view["services"]
    assert echo["ready"] == [{"replica": first, "url": "http://127.0.0.9:9000"}]
    serve_round(head, probes={first: False, second: True})  # a failing probe leaves the pool
    view = head.client.get("/v1/gateway/endpoints", headers=head.admin).json()
    assert [e["replica"] for e in view["services"][0]["ready"]] == [second]


def test_replicas_that_run_but_fail_their_probe_give_the_service_a_reason(head, clock):
    agent = head.register("n1")
    create(head)
    serve_round(head)
    start_replicas(head, agent)
    first, second = (r["job_id"] for r in show(head)["replicas"])
    clock.advance(40.0)
    serve_round(head, probes={first: False, second: True})
    out = show(head)
    assert out["replicas_ready"] == 1
    assert out["reason"] == (
        f"1 replica running but not ready: {first} does not pass its readiness probe, GET /ready "
        f"(running for 40 s; see readiness.path, and corral logs {first})"
    )
    serve_round(head, probes={first: True, second: True})
    assert show(head)["reason"] is None


def test_a_failed_replica_is_replaced(head, clock):
    agent = head.register("n1")
    create(head)
    serve_round(head)
    reports = start_replicas(head, agent)
    agent.beat([head.exited(reports[0], 1)])  # no restarts left? the job requeues first
    dead = reports[0]["task_id"].split("/")[0]
    head.cancel(dead)
    serve_round(head)
    assert f"replica {dead} ended (CANCELLED)" in show(head)["reason"]
    clock.advance(1.0)  # the first replacement waits a second
    serve_round(head)
    live = [j for j in replica_jobs(head) if j["state"] not in ("CANCELLED", "FAILED")]
    assert len(live) == 2
    assert dead not in {r["job_id"] for r in show(head)["replicas"]}


def test_scale_pins_the_count_and_drains_the_surplus(head, clock):
    agent = head.register("n1")
    create(head)
    serve_round(head)
    start_replicas(head, agent)
    ids = [r["job_id"] for r in show(head)["replicas"]]
    serve_round(head, probes=dict.fromkeys(ids, True))
    response = head.client.post("/v1/services/echo/scale", json={"replicas": 1}, headers=head.admin)
    assert response.status_code == 200, response.text
    assert response.json()["replicas_desired"] == 1
    serve_round(head, probes=dict.fromkeys(ids, True))
    draining = [r for r in show(head)["replicas"] if r["draining"]]
    assert len(draining) == 1
    clock.advance(serving_loop.DRAIN_MIN_S + 0.1)
    serve_round(head, probes=dict.fromkeys(ids, True))
    assert head.job(draining[0]["job_id"])["state"] == "CANCELLED"
    serve_round(head)
    assert [r["job_id"] for r in show(head)["replicas"]] != ids
    assert len(show(head)["replicas"]) == 1


def scaled_to_one_with_a_replica_draining(head):
    agent = head.register("n1")
    create(head)
    serve_round(head)
    start_replicas(head, agent)
    ids = [r["job_id"] for r in show(head)["replicas"]]
    serve_round(head, probes=dict.fromkeys(ids, True))
    head.client.post("/v1/services/echo/scale", json={"replicas": 1}, headers=head.admin)
    serve_round(head, probes=dict.fromkeys(ids, True))
    (draining,) = [r["job_id"] for r in show(head)["replicas"] if r["draining"]]
    return ids, draining


def test_a_drained_replica_runs_until_the_requests_it_holds_are_over(head, clock):
    ids, draining = scaled_to_one_with_a_replica_draining(head)
    ready = dict.fromkeys(ids, True)
    for _ in range(5):  # a long request: 2.1 s, 4.2 s, ... 10.5 s after the replica left the pool
        clock.advance(serving_loop.DRAIN_MIN_S + 0.1)
        serve_round(head, probes=ready, inflight={draining: 1})
        assert head.job(draining)["state"] == "RUNNING"
    serve_round(head, probes=ready, inflight={})  # the request is answered
    assert head.job(draining)["state"] == "CANCELLED"


def test_a_drained_replica_is_stopped_at_the_drain_maximum_whatever_it_holds(head, clock):
    ids, draining = scaled_to_one_with_a_replica_draining(head)
    clock.advance(serving_loop.DRAIN_MAX_S - 1)
    serve_round(head, probes=dict.fromkeys(ids, True), inflight={draining: 3})
    assert head.job(draining)["state"] == "RUNNING"
    clock.advance(1.1)
    serve_round(head, probes=dict.fromkeys(ids, True), inflight={draining: 3})
    assert head.job(draining)["state"] == "CANCELLED"


def test_replicas_that_exit_at_once_are_replaced_after_a_growing_back_off(head, clock):
    agent = head.register("n1")
    create(head, {**SERVICE, "replicas": {"min": 1, "max": 1}})
    serve_round(head)
    waits = []
    for _ in range(4):
        (report,) = start_replicas(head, agent)
        clock.advance(0.2)
        agent.beat([head.exited(report, 0)])  # exit 0: the job SUCCEEDED, and the service lost it
        serve_round(head)
        out = show(head)
        assert out["replicas"] == []
        assert "exited with code 0 after 0.2 s" in out["reason"], out["reason"]
        waited = 0.0
        while not show(head)["replicas"]:
            clock.advance(0.25)
            waited += 0.25
            serve_round(head)
        waits.append(waited)
    assert waits == [1.0, 2.0, 4.0, 8.0]
    events = head.client.get("/v1/events", params={"limit": 100}, headers=head.admin).json()
    exits = [e["message"] for e in events if e["kind"] == "service.replica_exited"]
    assert len(exits) == 4 and "replacing it in 8 s" in exits[-1]


def test_a_new_revision_starts_at_once_after_exits(head, clock):
    agent = head.register("n1")
    create(head, {**SERVICE, "replicas": {"min": 1, "max": 1}})
    serve_round(head)
    (report,) = start_replicas(head, agent)
    agent.beat([head.exited(report, 0)])
    serve_round(head)
    assert show(head)["replicas"] == [] and show(head)["reason"]
    create(head, {**SERVICE, "replicas": {"min": 1, "max": 1}, "command": "python serve.py --fixed"}, expect=200)
    serve_round(head)
    out = show(head)
    assert len(out["replicas"]) == 1 and "exited" not in out["reason"]  # the back-off is over
    assert out["reason"].startswith("1 replica not placed yet")


def test_the_head_gateway_is_told_of_changes_as_they_commit(head):
    head.register("n1")
    told = []
    serving.watch(head.rt, lambda: told.append(1))
    create(head)
    head.client.post("/v1/services/echo/scale", json={"replicas": 0}, headers=head.admin)
    head.client.delete("/v1/services/echo", headers=head.admin)
    assert len(told) == 3


def test_a_new_template_rolls_out_one_replica_at_a_time(head, clock):
    agent = head.register("n1")
    create(head)
    serve_round(head)
    start_replicas(head, agent)
    old = [r["job_id"] for r in show(head)["replicas"]]
    ready = dict.fromkeys(old, True)
    serve_round(head, probes=ready)
    updated = create(head, {**SERVICE, "command": "python serve.py --v2"}, expect=200)
    assert updated["revision"] == 2
    serve_round(head, probes=ready)
    replicas = show(head)["replicas"]
    assert len(replicas) == 3  # a surge of one
    (new,) = [r["job_id"] for r in replicas if r["revision"] == 2]
    assert not any(r["draining"] for r in replicas)  # nothing leaves before the new one is ready
    start_replicas(head, agent, port=9100)
    serve_round(head, probes={**ready, new: True})
    replicas = show(head)["replicas"]
    assert [r["revision"] for r in replicas if r["draining"]] == [1]
    staying = [r["revision"] for r in replicas if not r["draining"]]
    assert sorted(staying) == [1, 2, 2]  # the next new replica surges in its place


def test_an_update_whose_new_replica_never_gets_ready_says_what_it_waits_for(head, clock):
    agent = head.register("n1")
    create(head)
    serve_round(head)
    start_replicas(head, agent)
    ready = {r["job_id"]: True for r in show(head)["replicas"]}
    serve_round(head, probes=ready)
    create(head, {**SERVICE, "command": "python serve.py --v2"}, expect=200)
    serve_round(head, probes=ready)
    start_replicas(head, agent, port=9100)
    (new,) = [r["job_id"] for r in show(head)["replicas"] if r["revision"] == 2]
    clock.advance(30.0)
    serve_round(head, probes={**ready, new: False})
    out = show(head)
    assert out["replicas_ready"] == 2 and not any(r["draining"] for r in out["replicas"])  # the old ones serve
    assert out["reason"].startswith(
        f"1 replica running but not ready: {new} does not pass its readiness probe, GET /ready "
    ), out
    assert out["reason"].endswith("; the update to revision 2 waits for it"), out["reason"]


def test_changing_only_the_bounds_keeps_the_revision(head):
    head.register("n1")
    create(head)
    out = create(head, {**SERVICE, "replicas": {"min": 3, "max": 5}}, expect=200)
    assert out["revision"] == 1 and out["replicas_desired"] == 3


def test_the_autoscaler_adds_replicas_under_sustained_load(head, clock):
    head.register("n1")
    create(head, {**SERVICE, "autoscale": {"target_inflight": 2, "up_delay": "2s"}})
    busy = {"echo": [LoadSample(at=0, inflight=7, rps=50)]}
    serve_round(head, windows=busy)
    assert show(head)["replicas_desired"] == 2  # not yet: the overload must last up_delay
    clock.advance(2.5)
    serve_round(head, windows=busy)
    assert show(head)["replicas_desired"] == 4  # ceil(7 / 2), within max
    assert len(show(head)["replicas"]) == 4


def test_delete_stops_every_replica(head):
    head.register("n1")
    create(head)
    serve_round(head)
    jobs = [j["id"] for j in replica_jobs(head)]
    response = head.client.delete("/v1/services/echo", headers=head.admin)
    assert response.status_code == 204
    assert {head.job(j)["state"] for j in jobs} == {"CANCELLED"}
    assert head.client.get("/v1/services/echo", headers=head.admin).status_code == 404
    assert head.client.get("/v1/services", headers=head.admin).json() == []


def test_bad_specs_name_the_field(head):
    response = head.client.post("/v1/services", json={**SERVICE, "replicas": {"min": 3, "max": 1}}, headers=head.admin)
    assert response.status_code == 422
    assert "replicas" in response.text and "at least min" in response.text
    head.register("n1", gpus=1)
    response = head.client.post("/v1/services", json={**SERVICE, "resources": {"gpus": 8}}, headers=head.admin)
    assert response.status_code == 422
    assert "resources" in response.text


def test_a_relative_workdir_is_refused_naming_the_field(head):
    response = head.client.post("/v1/services", json={**SERVICE, "workdir": "app"}, headers=head.admin)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "workdir"
    assert head.client.get("/v1/services", headers=head.admin).json() == []
    create(head, {**SERVICE, "workdir": "/srv/app"})


def test_users_see_only_their_own_services(head):
    head.register("n1")
    create(head)
    alice = head.user_token("alice")
    assert head.client.get("/v1/services", headers=head.auth(alice)).json() == []
    assert head.client.get("/v1/services/echo", headers=head.auth(alice)).status_code == 404
    assert head.client.delete("/v1/services/echo", headers=head.auth(alice)).status_code == 404


def test_serving_a_name_another_user_owns_is_a_conflict_that_changes_nothing(head):
    head.register("n1")
    before = create(head)
    alice = head.user_token("alice")
    response = head.client.post("/v1/services", json={**SERVICE, "command": "other"}, headers=head.auth(alice))
    assert response.status_code == 409
    assert "belongs to another user; choose another name" in response.text
    assert show(head)["revision"] == before["revision"]


def test_gateways_report_load(head):
    body = {"gateway": "g1", "services": {"echo": {"inflight": 3, "requests": 10, "waiting": 0}}}
    response = head.client.post("/v1/gateway/load", json=body, headers=head.admin)
    assert response.status_code == 204
    windows = head.app.state.serve_book.windows(head.clock.monotonic())
    assert windows["echo"][-1].inflight == 3
    body["services"]["echo"]["replicas"] = {"j1": 2, "j2": 1}
    head.client.post("/v1/gateway/load", json=body, headers=head.admin)
    assert head.app.state.serve_book.replica_inflight(head.clock.monotonic()) == {"j1": 2, "j2": 1}


def test_scaling_to_zero_by_hand_stops_the_service_for_the_gateway(head):
    head.register("n1")
    create(head)
    serve_round(head)
    response = head.client.post("/v1/services/echo/scale", json={"replicas": 0}, headers=head.admin)
    assert response.status_code == 200, response.text
    assert (response.json()["replicas_min"], response.json()["replicas_max"]) == (0, 0)
    busy = {"echo": [LoadSample(at=0, inflight=5, rps=10)]}
    serve_round(head, windows=busy)  # requests do not wake a service stopped by hand
    assert show(head)["replicas_desired"] == 0
    assert all(r["draining"] for r in show(head)["replicas"])
    (view,) = head.client.get("/v1/gateway/endpoints", headers=head.admin).json()["services"]
    assert view["stopped"] is True and view["ready"] == []
