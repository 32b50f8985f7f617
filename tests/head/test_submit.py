"""Submitting jobs: idempotency keys, all-or-nothing batches, and the feasibility check."""

from sqlalchemy import func, select

from corral.head.store.tables import EventRow, JobRow


def job_count(head) -> int:
    with head.rt.read() as session:
        return int(session.scalar(select(func.count()).select_from(JobRow)) or 0)


def test_a_submitted_job_is_pending_with_its_spec(head):
    job = head.submit(
        {
            "name": "train",
            "command": ["python", "train.py"],
            "resources": {"gpus": 2, "gpu_type": "H100", "memory": "64GB", "cpus": 8},
            "team": "research",
            "priority": 5,
            "time_limit": "2h",
            "max_restarts": 2,
            "env": {"EPOCHS": 3},
        }
    )
    assert job["id"].startswith("j-")
    assert job["state"] == "PENDING"
    assert job["name"] == "train"
    assert job["team"] == "research"
    assert job["priority"] == 5
    assert job["gpus_per_node"] == 2
    assert job["gpu_types"] == ["H100"]
    assert job["memory_mb"] == 64 * 1024
    assert job["cpus"] == 8
    assert job["time_limit_s"] == 7200
    assert job["max_restarts"] == 2
    assert job["env"] == {"EPOCHS": "3"}
    assert job["submitted_at"] == "2025-01-01T00:00:00Z"
    assert job["started_at"] is None
    assert job["allocation"] == []
    assert job["restarts"] == 0
    assert job["reason"]
    assert head.job(job["id"]) == job


def test_submit_records_an_event(head):
    job = head.submit({"command": "x"})
    with head.rt.read() as session:
        kinds = list(session.scalars(select(EventRow.kind).where(EventRow.job_id == job["id"])))
    assert kinds == ["job.submitted"]


def test_a_fractional_job_keeps_its_fraction(head):
    assert head.submit({"command": "x", "resources": {"gpus": 0.5}})["gpus_per_node"] == 0.5


def test_the_same_idempotency_key_returns_the_same_job(head):
    spec = {"command": "python train.py", "resources": {"gpus": 1}}
    headers = {**head.admin, "Idempotency-Key": "retry-1"}
    first = head.client.post("/v1/jobs", json=spec, headers=headers)
    second = head.client.post("/v1/jobs", json=spec, headers=headers)
    assert first.status_code == 201
    assert second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert job_count(head) == 1


def test_different_idempotency_keys_make_different_jobs(head):
    spec = {"command": "python train.py"}
    first = head.client.post("/v1/jobs", json=spec, headers={**head.admin, "Idempotency-Key": "a"})
    second = head.client.post("/v1/jobs", json=spec, headers={**head.admin, "Idempotency-Key": "b"})
    third = head.client.post("/v1/jobs", json=spec, headers=head.admin)
    assert len({first.json()["id"], second.json()["id"], third.json()["id"]}) == 3
    assert job_count(head) == 3


def test_an_empty_idempotency_key_is_no_key(head):
    spec = {"command": "python train.py"}
    answers = [head.client.post("/v1/jobs", json=spec, headers={**head.admin, "Idempotency-Key": ""}) for _ in "ab"]
    assert [a.status_code for a in answers] == [201, 201]
    assert len({a.json()["id"] for a in answers}) == 2


def test_idempotency_keys_are_per_user(head):
    spec = {"command": "x"}
    mine = head.client.post("/v1/jobs", json=spec, headers={**head.admin, "Idempotency-Key": "k"})
    alice = head.user_token("alice")
    theirs = head.client.post("/v1/jobs", json=spec, headers={**head.auth(alice), "Idempotency-Key": "k"})
    assert theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]


def test_a_repeated_key_returns_the_job_as_it_is_now(head):
    headers = {**head.admin, "Idempotency-Key": "k"}
    job = head.client.post("/v1/jobs", json={"command": "x"}, headers=headers).json()
    head.cancel(job["id"])
    again = head.client.post("/v1/jobs", json={"command": "x"}, headers=headers)
    assert again.status_code == 200
    assert again.json()["state"] == "CANCELLED"


def test_batch_submit_accepts_all(head):
    response = head.client.post(
        "/v1/jobs/batch",
        json={"jobs": [{"command": "a"}, {"command": "b", "resources": {"gpus": 1}}]},
        headers=head.admin,
    )
    assert response.status_code == 201
    ids = response.json()["ids"]
    assert len(set(ids)) == 2
    assert [head.job(i)["name"] for i in ids] == ["a", "b"]


def test_batch_submit_with_one_bad_spec_stores_nothing(head):
    jobs = [{"command": "a"}, {"command": "b", "resources": {"gpus": 1.5}}, {"command": "c"}]
    response = head.client.post("/v1/jobs/batch", json={"jobs": jobs}, headers=head.admin)
    assert response.status_code == 422
    assert [d["field"] for d in response.json()["detail"]] == ["jobs[1].resources.gpus"]
    assert job_count(head) == 0


def test_batch_submit_with_one_infeasible_job_stores_nothing(head):
    head.register("n1", gpus=8)
    jobs = [{"command": "a", "resources": {"gpus": 8}}, {"command": "b", "resources": {"gpus": 16}}]
    response = head.client.post("/v1/jobs/batch", json={"jobs": jobs}, headers=head.admin)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["field"] == "jobs[1].resources"
    assert "16 GPUs" in detail["msg"]
    assert job_count(head) == 0


def test_a_relative_workdir_is_refused_naming_the_field(head):
    """On the node it would be taken against the agent's directory; the CLI resolves one before sending."""
    response = head.client.post("/v1/jobs", json={"command": "x", "workdir": "data/run"}, headers=head.admin)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["field"] == "workdir"
    assert detail["msg"].startswith("must be an absolute path, got 'data/run'")
    jobs = [{"command": "a", "workdir": "/data"}, {"command": "b", "workdir": "./run"}]
    response = head.client.post("/v1/jobs/batch", json={"jobs": jobs}, headers=head.admin)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "jobs[1].workdir"
    assert job_count(head) == 0
    assert head.submit({"command": "x", "workdir": "/data/run"})["state"] == "PENDING"


def test_empty_batch_is_refused(head):
    response = head.client.post("/v1/jobs/batch", json={"jobs": []}, headers=head.admin)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "jobs"


def test_too_many_gpus_per_node_is_refused_with_what_the_cluster_offers(head):
    head.register("n1", gpus=8)
    head.register("n2", gpus=8)
    response = head.client.post("/v1/jobs", json={"command": "x", "resources": {"gpus": 16}}, headers=head.admin)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["field"] == "resources"
    assert detail["type"] == "infeasible"
    assert detail["msg"].startswith("can never run on this cluster")
    assert "largest node has 8 H100" in detail["msg"]
    assert "cluster offers: 2 nodes × 8 H100" in detail["msg"]
    assert job_count(head) == 0


def test_a_gang_larger_than_the_cluster_names_nodes(head):
    head.register("n1", gpus=8)
    spec = {"command": "x", "nodes": 2, "resources": {"gpus": 4}}
    response = head.client.post("/v1/jobs", json=spec, headers=head.admin)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["field"] == "nodes" and detail["msg"].startswith("can never run on this cluster")
    assert job_count(head) == 0


def test_a_gang_required_in_one_rack_no_rack_holds_is_refused(head):
    for i in range(3):
        head.register(f"a{i}", gpus=8, labels={"rack": "r1" if i < 2 else "r2"})
    spec = {"command": "x", "nodes": 3, "resources": {"gpus": 8}, "topology": {"required": "rack"}}
    response = head.client.post("/v1/jobs", json=spec, headers=head.admin)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["field"] == "topology"
    assert "all in one rack (topology.required); the most one rack has is 2" in detail["msg"]
    packed = {**spec, "topology": {"pack": "rack"}}
    assert head.client.post("/v1/jobs", json=packed, headers=head.admin).status_code == 201
    assert job_count(head) == 1


def test_unknown_gpu_type_is_refused_listing_the_types(head):
    head.register("n1", gpus=8, gpu_type="H100")
    head.register("n2", gpus=4, gpu_type="L4")
    response = head.client.post(
        "/v1/jobs", json={"command": "x", "resources": {"gpus": 1, "gpu_type": "B200"}}, headers=head.admin
    )
    assert response.status_code == 422
    message = response.json()["detail"][0]["msg"]
    assert "B200" in message
    assert "H100" in message
    assert "L4" in message


def test_more_nodes_than_registered_is_refused(head):
    head.register("n1", gpus=8)
    response = head.client.post(
        "/v1/jobs", json={"command": "x", "nodes": 3, "resources": {"gpus": 8}}, headers=head.admin
    )
    assert response.status_code == 422
    assert "only 1 such node is registered" in response.json()["detail"][0]["msg"]


def test_a_job_that_fits_a_busy_cluster_is_accepted(head):
    head.register("n1", gpus=8)
    head.submit({"command": "a", "resources": {"gpus": 8}})
    head.cycle()
    job = head.submit({"command": "b", "resources": {"gpus": 8}})
    head.cycle()
    reason = head.job(job["id"])["reason"]
    assert reason.startswith("waiting for 1 node with 8 free GPUs")
    assert "queue position 1 of 1" in reason


def test_with_no_nodes_a_job_is_accepted_and_waits_with_a_reason(head):
    job = head.submit({"command": "x", "nodes": 64, "resources": {"gpus": 8, "gpu_type": "B200"}})
    assert job["state"] == "PENDING"
    result = head.cycle()
    assert result.pending == 1
    assert result.placed == 0
    job = head.job(job["id"])
    assert job["state"] == "PENDING"
    assert job["reason"].startswith("waiting for a node to join")


def test_list_jobs_filters_by_state(head):
    head.register("n1", gpus=1)
    first = head.submit({"command": "a", "resources": {"gpus": 1}})
    second = head.submit({"command": "b"})
    head.cancel(second["id"])
    pending = head.client.get("/v1/jobs", params={"state": "pending"}, headers=head.admin).json()
    assert [j["id"] for j in pending] == [first["id"]]
    both = head.client.get("/v1/jobs", params=[("state", "PENDING"), ("state", "CANCELLED")], headers=head.admin)
    assert [j["id"] for j in both.json()] == [first["id"], second["id"]]


def test_finished_jobs_drop_out_of_the_default_list_after_a_day(head):
    job = head.submit({"command": "x"})
    head.cancel(job["id"])
    assert [j["id"] for j in head.client.get("/v1/jobs", headers=head.admin).json()] == [job["id"]]
    head.clock.advance(25 * 3600)
    assert head.client.get("/v1/jobs", headers=head.admin).json() == []
    assert [j["id"] for j in head.jobs()] == [job["id"]]


def test_a_key_reused_for_a_different_job_is_refused(head):
    headers = {**head.admin, "Idempotency-Key": "retry-2"}
    first = head.client.post("/v1/jobs", json={"command": "python a.py"}, headers=headers)
    second = head.client.post("/v1/jobs", json={"command": "python b.py"}, headers=headers)
    assert first.status_code == 201
    assert second.status_code == 409
    assert first.json()["id"] in second.json()["detail"]
    assert job_count(head) == 1


def test_an_unknown_field_lists_the_valid_ones(head):
    response = head.client.post("/v1/jobs", json={"command": "x", "gpus": 1}, headers=head.admin)
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert detail["field"] == "gpus"
    assert "valid fields are name, command, nodes, resources" in detail["msg"]


def test_an_unknown_field_inside_a_batch_lists_the_valid_ones(head):
    jobs = [{"command": "a"}, {"command": "b", "resources": {"gpu": 1}}]
    response = head.client.post("/v1/jobs/batch", json={"jobs": jobs}, headers=head.admin)
    [detail] = response.json()["detail"]
    assert detail["field"] == "jobs[1].resources.gpu"
    assert "valid fields are gpus, gpu_type, cpus, memory" in detail["msg"]


def test_a_body_that_is_not_json_says_so(head):
    response = head.client.post(
        "/v1/jobs", content=b'{"command": ', headers={**head.admin, "Content-Type": "application/json"}
    )
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert detail["field"] == ""
    assert "not valid JSON" in detail["msg"]
