"""Draining a node: no new work lands there, what runs keeps running, and it survives restarts."""


def drain(head, node, reason="", token=None):
    return head.client.post(
        f"/v1/nodes/{node}/drain",
        json={"reason": reason},
        headers={"Authorization": f"Bearer {token or head.admin_token}"},
    )


def test_a_drained_node_gets_no_new_work_but_keeps_its_running_jobs(head):
    n1 = head.register("n1", gpus=2)
    running = head.submit({"command": "a", "resources": {"gpus": 1}})
    head.cycle()
    [task] = n1.tasks()
    n1.beat([head.running(task)])
    response = drain(head, "n1", "replacing a fan")
    assert response.status_code == 200
    assert response.json()["state"] == "DRAINED"
    assert response.json()["reason"] == "drained by " + head.job(running["id"])["user"] + ": replacing a fan"
    waiting = head.submit({"command": "b", "resources": {"gpus": 1}})
    assert head.cycle().placed == 0
    assert head.job(running["id"])["state"] == "RUNNING"
    assert [t["task_id"] for t in n1.tasks()] == [task["task_id"]]
    assert head.client.post("/v1/nodes/n1/undrain", headers=head.admin).json()["state"] == "READY"
    assert head.cycle().placed == 1
    assert head.job(waiting["id"])["allocation"][0]["node"] == "n1"


def test_draining_is_for_admins_and_names_a_node(head):
    head.register("n1")
    assert drain(head, "n1", token=head.user_token("alice")).status_code == 403
    assert drain(head, "nope").status_code == 404


def test_a_drained_node_stays_drained_when_it_registers_again_or_times_out(head):
    head.register("n1")
    drain(head, "n1", "maintenance")
    head.register("n1")
    assert head.nodes()["n1"]["state"] == "DRAINED"
    head.clock.advance(11)
    head.check_nodes()
    assert head.nodes()["n1"]["state"] == "NOT_READY"
    head.register("n1")
    node = head.nodes()["n1"]
    assert node["state"] == "DRAINED"
    assert "maintenance" in node["reason"]


def test_draining_a_drained_node_again_without_a_reason_keeps_the_first_reason(head):
    head.register("n1")
    assert drain(head, "n1", "maintenance window").status_code == 200
    assert drain(head, "n1").status_code == 200
    assert head.nodes()["n1"]["reason"].endswith("maintenance window")
    assert drain(head, "n1", "new reason").json()["reason"].endswith("new reason")


def test_draining_or_undraining_again_records_no_second_event(head):
    head.register("n1")
    drain(head, "n1", "a")
    drain(head, "n1")  # again, no reason: nothing changes
    drain(head, "n1", "b")  # a new reason: a change
    for _ in range(2):
        assert head.client.post("/v1/nodes/n1/undrain", headers=head.admin).status_code == 200
    events = head.client.get("/v1/events", params={"limit": 1000}, headers=head.admin).json()
    kinds = [e["kind"] for e in events if e["kind"].startswith("node.") and "drain" in e["kind"]]
    assert sorted(kinds) == ["node.drained", "node.drained", "node.undrained"]
