"""An agent that shuts down says so in its last heartbeat; a head counts silence from when it began to watch."""

from datetime import timedelta

from corral.head.services.liveness import check_nodes

from .conftest import auth


def farewell(head, agent, tasks):
    body = {"tasks": tasks, "applied_version": agent.applied, "leaving": True}
    response = head.client.post(f"/v1/agents/{agent.name}/heartbeat", json=body, headers=auth(agent.token))
    assert response.status_code == 200, response.text
    return response.json()


def running_on(head, node, **extra):
    job = head.submit({"command": "train", "resources": {"gpus": 8}, **extra})
    assert head.cycle().placed == 1
    [task] = head.agents[node].tasks()
    return job["id"], task


def test_a_leaving_agent_takes_its_node_out_and_its_stopped_job_goes_elsewhere(head):
    n1 = head.register("n1")
    job_id, task = running_on(head, "n1", max_restarts=0)
    n1.beat([head.running(task)])
    n2 = head.register("n2")

    stopped = {**head.exited(task, 143, "stopped: the agent is shutting down"), "interrupted": True}
    desired = farewell(head, n1, [stopped])

    assert desired["tasks"] == []
    node = head.nodes()["n1"]
    assert node["state"] == "NOT_READY"
    assert node["reason"] == "its agent shut down; the node takes work again once an agent registers"
    job = head.job(job_id)
    assert (job["state"], job["restarts"]) == ("PENDING", 1)
    assert head.cycle().placed == 1
    [again] = n2.tasks()
    assert again["job_id"] == job_id
    assert n1.heartbeat().status_code == 409  # gone until an agent registers again

    head.register("n1")
    assert head.nodes()["n1"]["state"] == "READY"


def test_a_task_handed_to_a_leaving_agent_and_never_started_is_queued_again_whatever_the_budget(head):
    n1 = head.register("n1")
    job_id, _task = running_on(head, "n1", max_restarts=0)

    farewell(head, n1, [])  # it shut down before acting on the task

    job = head.job(job_id)
    assert (job["state"], job["restarts"]) == ("PENDING", 1)
    assert "its agent shut down before starting it" in job["reason"]
    assert head.free_gpus("n1") == list(range(8))
    assert head.cycle().placed == 0  # its only node is gone


def test_a_leaving_heartbeat_is_never_answered_from_memory(head):
    n1 = head.register("n1")
    n1.beat()
    n1.beat()  # remembered: the next identical heartbeat would be answered from memory
    farewell(head, n1, [])
    assert head.nodes()["n1"]["state"] == "NOT_READY"


def test_silence_counts_only_from_when_the_head_began_to_watch(head):
    head.register("n1")
    head.clock.advance(60)  # no head watched meanwhile (it was down)
    watching_since = head.clock.now()
    assert check_nodes(head.rt, watching_since) == []
    head.clock.advance(9)
    assert check_nodes(head.rt, watching_since) == []
    head.clock.advance(2)
    assert check_nodes(head.rt, watching_since) == ["n1"]
    assert head.nodes()["n1"]["reason"] == "no heartbeat for 71s (node timeout 10s)"


def test_a_node_heard_after_the_head_began_to_watch_keeps_its_own_clock(head):
    n1 = head.register("n1")
    watching_since = head.clock.now() - timedelta(seconds=30)
    head.clock.advance(5)
    n1.beat()
    head.clock.advance(9)
    assert check_nodes(head.rt, watching_since) == []
    head.clock.advance(2)
    assert check_nodes(head.rt, watching_since) == ["n1"]


def test_a_drained_node_whose_agent_leaves_says_it_comes_back_drained(head):
    n1 = head.register("n1")
    response = head.client.post("/v1/nodes/n1/drain", json={"reason": "maintenance"}, headers=head.admin)
    assert response.status_code == 200, response.text
    farewell(head, n1, [])
    node = head.nodes()["n1"]
    assert node["state"] == "NOT_READY"
    assert "comes back drained when an agent registers" in node["reason"]
    assert "maintenance" in node["reason"]
    head.register("n1")
    assert head.nodes()["n1"]["state"] == "DRAINED"


def test_draining_or_undraining_a_node_whose_agent_left_says_how_it_comes_back_now(head):
    n1 = head.register("n1")
    head.client.post("/v1/nodes/n1/drain", json={"reason": "maintenance"}, headers=head.admin)
    farewell(head, n1, [])
    undrained = head.client.post("/v1/nodes/n1/undrain", headers=head.admin).json()
    assert undrained["state"] == "NOT_READY"
    assert undrained["reason"] == "its agent shut down; the node takes work again once an agent registers"
    drained = head.client.post("/v1/nodes/n1/drain", json={"reason": "new fan"}, headers=head.admin).json()
    assert drained["state"] == "NOT_READY"
    assert "comes back drained when an agent registers" in drained["reason"]
    assert drained["reason"].endswith(": new fan)")


def test_an_agent_that_falls_silent_while_leaving_has_its_tasks_declared_lost(head):
    n1 = head.register("n1")
    job_id, task = running_on(head, "n1", max_restarts=1)
    n1.beat([head.running(task)])
    farewell(head, n1, [head.running(task)])  # leaving: its task still stops, within its grace period
    assert head.nodes()["n1"]["state"] == "NOT_READY"
    assert head.job(job_id)["state"] == "RUNNING"

    head.clock.advance(5)
    check_nodes(head.rt)
    assert head.job(job_id)["state"] == "RUNNING"  # within the node timeout: it may still report

    head.clock.advance(6)  # then nothing more came
    check_nodes(head.rt)
    job = head.job(job_id)
    assert (job["state"], job["restarts"]) == ("PENDING", 1)
    assert "node n1 stopped answering" in job["reason"]
