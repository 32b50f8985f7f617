"""The desired-state long-poll: agents hear of new work at once, not at their next heartbeat."""

import threading
import time

# A poll that a change must wake waits this long otherwise: far longer than a woken one takes, even on a
# loaded machine, where the request that makes the change may itself take seconds. Promptness is measured
# from that request's answer.
WAIT_S = 30


def poll_in_thread(agent, after, wait):
    box = {}

    def run():
        started = time.monotonic()
        box["desired"] = agent.desired(after=after, wait=wait)
        box["answered"] = time.monotonic()
        box["elapsed"] = box["answered"] - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def answered_within(thread, seconds):
    """Whether the poll answered within ``seconds``. If not, it is waited for all the same: a head stopped
    while a request is in flight may never finish stopping."""
    thread.join(timeout=seconds)
    answered = not thread.is_alive()
    thread.join(timeout=WAIT_S + 10)
    return answered


def test_a_different_version_answers_at_once(head):
    agent = head.register("n1")
    head.submit({"command": "x", "resources": {"gpus": 1}})
    head.cycle()
    current = agent.desired()["version"]
    started = time.monotonic()
    desired = agent.desired(after=current - 1, wait=5)
    assert time.monotonic() - started < 1.0
    assert desired["version"] == current
    assert len(desired["tasks"]) == 1


def test_no_change_answers_after_the_wait(head):
    agent = head.register("n1")
    current = agent.desired()["version"]
    started = time.monotonic()
    desired = agent.desired(after=current, wait=0.3)
    assert time.monotonic() - started >= 0.25
    assert desired["version"] == current


def test_a_waiting_poll_returns_promptly_when_a_job_is_placed_on_its_node(head):
    agent = head.register("n1")
    current = agent.desired()["version"]
    thread, box = poll_in_thread(agent, after=current, wait=WAIT_S)
    time.sleep(0.3)
    assert thread.is_alive()  # waiting for a change
    job = head.submit({"command": "x", "resources": {"gpus": 1}})
    head.cycle()
    placed = time.monotonic()
    assert answered_within(thread, 4), "the poll was not woken by the placement"
    assert box["answered"] - placed < 2.5
    desired = box["desired"]
    assert desired["version"] > current
    assert [t["job_id"] for t in desired["tasks"]] == [job["id"]]


def test_a_cancel_wakes_the_poll_too(head):
    agent = head.register("n1")
    job = head.submit({"command": "x", "resources": {"gpus": 1}})
    head.cycle()
    current = agent.desired()["version"]
    thread, box = poll_in_thread(agent, after=current, wait=WAIT_S)
    time.sleep(0.3)
    head.cancel(job["id"])
    cancelled = time.monotonic()
    assert answered_within(thread, 4), "the poll was not woken by the cancel"
    assert box["answered"] - cancelled < 2.5
    assert box["desired"]["tasks"] == []


def test_a_change_on_another_node_does_not_wake_the_poll(head):
    agent = head.register("n1", gpus=1)
    head.register("n2", gpus=1)
    head.submit({"command": "a", "resources": {"gpus": 1}})
    head.cycle()
    busy = agent if agent.tasks() else head.agents["n2"]
    idle = head.agents["n1"] if busy is not head.agents["n1"] else head.agents["n2"]
    current = idle.desired()["version"]
    thread, box = poll_in_thread(idle, after=current, wait=1.0)
    time.sleep(0.2)
    head.cancel(busy.tasks()[0]["job_id"])  # bumps the busy node only
    thread.join(timeout=4)
    assert box["elapsed"] >= 0.9
    assert box["desired"]["version"] == current


def test_the_wait_is_capped(head):
    agent = head.register("n1")
    response = head.client.get("/v1/agents/n1/desired", params={"wait": 600}, headers=head.auth(agent.token))
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "wait"
