"""Agents joining and re-joining: inventory, credentials, and what happens to their tasks."""


def placed(head, agent, **extra):
    job = head.submit({"command": "x", "resources": {"gpus": 2}, **extra})
    head.cycle()
    [task] = [t for t in agent.tasks() if t["job_id"] == job["id"]]
    return job["id"], task


def test_registration_records_the_inventory(head):
    head.register("n1", gpus=4, gpu_type="A100", addr="10.1.2.3", labels={"rack": "r1"}, cpus=32)
    node = head.nodes()["n1"]
    assert node["state"] == "READY"
    assert node["labels"] == {"rack": "r1"}
    assert node["address"] == "10.1.2.3"
    assert node["cpus"] == 32
    assert [(g["index"], g["type"], g["allocated_to"]) for g in node["gpus"]] == [(i, "A100", None) for i in range(4)]
    assert node["registered_at"] == node["last_heartbeat"] == "2025-01-01T00:00:00Z"


def test_registration_answers_the_agent_settings_and_desired_state(head):
    body = {"name": "n1", "cpus": 4, "memory_mb": 1024}
    reply = head.client.post("/v1/agents/register", json=body, headers=head.auth(head.join_token())).json()
    assert reply["node"] == "n1"
    assert reply["node_token"].startswith("cn_")
    assert reply["heartbeat_interval_s"] == 2.0
    assert reply["lease_s"] == 15.0
    assert reply["desired"] == {"version": 1, "tasks": [], "stop_grace_s": {}}  # registering bumps the version


def test_registering_again_updates_the_inventory_and_replaces_the_credential(head):
    old = head.register("n1", gpus=8)
    new = head.register("n1", gpus=4, labels={"rack": "r2"})
    node = head.nodes()["n1"]
    assert len(node["gpus"]) == 4
    assert node["labels"] == {"rack": "r2"}
    assert node["registered_at"] == "2025-01-01T00:00:00Z"
    assert old.heartbeat().status_code == 403
    assert new.heartbeat().status_code == 200
    assert list(head.nodes()) == ["n1"]


def test_a_task_still_running_after_re_registration_keeps_running(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent)
    agent.beat([head.running(task)])
    agent = head.register("n1", running=[head.running(task)])
    job = head.job(job_id)
    assert job["state"] == "RUNNING"
    assert job["tasks"][0]["state"] == "RUNNING"
    assert [t["task_id"] for t in agent.tasks()] == [task["task_id"]]
    assert head.free_gpus("n1") == list(range(2, 8))


def test_a_running_task_the_agent_no_longer_runs_is_lost_and_the_job_requeued(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent, max_restarts=1)
    agent.beat([head.running(task)])
    agent = head.register("n1", running=[])
    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["restarts"] == 1
    assert "node rank 0 lost: node n1 restarted and no longer runs it" in job["reason"]
    assert head.free_gpus("n1") == list(range(8))
    assert agent.tasks() == []
    assert head.cycle().placed == 1
    assert agent.tasks()[0]["generation"] == 1


def test_a_lost_task_without_restarts_fails_the_job(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent)
    agent.beat([head.running(task)])
    head.register("n1")
    job = head.job(job_id)
    assert job["state"] == "FAILED"
    assert "node n1 restarted" in job["reason"]


def test_a_running_report_of_an_older_generation_does_not_save_the_task(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent)
    agent.beat([head.running(task)])
    head.register("n1", running=[{**head.running(task), "generation": 7}])
    assert head.job(job_id)["state"] == "FAILED"


def test_an_assigned_but_unstarted_task_is_handed_over(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent)
    agent = head.register("n1", running=[])
    job = head.job(job_id)
    assert job["state"] == "PENDING"
    assert job["tasks"][0]["state"] == "ASSIGNED"
    assert [t["task_id"] for t in agent.tasks()] == [task["task_id"]]
    agent.beat([head.running(task)])
    assert head.job(job_id)["state"] == "RUNNING"


def test_a_stopping_task_gone_after_re_registration_frees_its_gpus(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent)
    agent.beat([head.running(task)])
    head.cancel(job_id)
    assert head.free_gpus("n1") == list(range(2, 8))
    head.register("n1")
    assert head.free_gpus("n1") == list(range(8))
    job = head.job(job_id)
    assert job["state"] == "CANCELLED"
    assert job["tasks"][0]["state"] == "EXITED"


def test_re_registration_after_being_declared_lost_is_ready_again(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent, max_restarts=1)
    agent.beat([head.running(task)])
    head.clock.advance(11)
    head.check_nodes()
    assert head.job(job_id)["restarts"] == 1
    # The fenced agent killed its tasks; it comes back empty.
    agent = head.register("n1")
    assert head.nodes()["n1"]["state"] == "READY"
    assert head.job(job_id)["restarts"] == 1  # not counted twice
    assert head.cycle().placed == 1
    assert agent.tasks()[0]["generation"] == 1


def test_a_heartbeating_node_is_not_handed_to_another_agent_of_the_same_name(head):
    first = head.register("n1", gpus=2)
    first.beat()
    body = {"name": "n1", "cpus": 8, "memory_mb": 1024, "gpus": [], "labels": {"rack": "other"}}
    other = head.client.post("/v1/agents/register", json=body, headers=head.auth(head.join_token()))
    assert other.status_code == 409, other.text
    assert "node n1 is held by another agent" in other.json()["detail"] and "--name" in other.json()["detail"]
    assert first.heartbeat().status_code == 200  # the first keeps its node and credential
    assert len(head.nodes()["n1"]["gpus"]) == 2

    again = head.client.post(
        "/v1/agents/register", json={**body, "node_token": first.token}, headers=head.auth(head.join_token())
    )
    assert again.status_code == 200  # the same agent, restarted, shows its credential

    head.clock.advance(11)  # silent past the node timeout: the node may be taken over
    taken = head.client.post("/v1/agents/register", json=body, headers=head.auth(head.join_token()))
    assert taken.status_code == 200, taken.text
