"""/v1/events: every state change, in order, for those allowed to see it."""

import threading
import time


def events(head, token=None, **params):
    response = head.client.get(
        "/v1/events", params=params, headers={"Authorization": f"Bearer {token or head.admin_token}"}
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_jobs_life_is_in_the_stream_in_order(head):
    agent = head.register("n1", gpus=1)
    job = head.submit({"command": "x", "resources": {"gpus": 1}})
    head.cycle()
    [task] = agent.tasks()
    agent.beat([head.running(task)])
    agent.beat([head.exited(task, 0)])
    own = events(head, job=job["id"])
    kinds = [e["kind"] for e in own]
    assert kinds == ["job.submitted", "job.placed", "job.running", "task.released", "job.succeeded"]
    placed, released = own[1], own[3]
    assert placed["data"]["tasks"] == [{"task": task["task_id"], "node": "n1", "gpus": task["gpus"], "fraction": 1.0}]
    assert released["node"] == "n1"
    assert released["data"] == {"task": task["task_id"], "gpus": task["gpus"], "state": "EXITED"}
    every = events(head)
    assert [e["id"] for e in every] == sorted(e["id"] for e in every)
    assert every[0]["kind"] == "node.registered" and every[0]["node"] == "n1"
    later = events(head, after=every[1]["id"])
    assert [e["id"] for e in later] == [e["id"] for e in every[2:]]


def test_users_see_only_their_own_jobs_events(head):
    alice = head.user_token("alice")
    mine = head.submit({"command": "mine"}, token=alice)
    head.submit({"command": "theirs"})
    seen = {e["job_id"] for e in events(head, token=alice) if e["job_id"]}
    assert seen == {mine["id"]}


def test_waiting_answers_when_an_event_arrives(head):
    last = events(head)[-1]["id"] if events(head) else 0
    timer = threading.Timer(0.3, lambda: head.submit({"command": "late"}))
    timer.start()
    started = time.monotonic()
    found = events(head, after=last, wait=5)
    timer.join()
    assert [e["kind"] for e in found] == ["job.submitted"]
    assert time.monotonic() - started < 3


def test_users_see_only_their_own_services_events(head):
    alice, bob = head.user_token("alice"), head.user_token("bob")
    for name, token in (("alices", alice), ("bobs", bob)):
        spec = {"name": name, "command": "python serve.py", "replicas": {"min": 1, "max": 1}}
        response = head.client.post("/v1/services", json=spec, headers=head.auth(token))
        assert response.status_code == 201, response.text
    response = head.client.post("/v1/services/bobs/scale", json={"replicas": 2}, headers=head.auth(bob))
    assert response.status_code == 200, response.text
    head.register("n1", gpus=0)  # a cluster event: everyone sees it

    def seen(token):
        return [(e["kind"], e["message"].split()[1]) for e in events(head, token=token) if e["kind"] != "job.submitted"]

    assert ("service.created", "alices") in seen(alice) and ("node.registered", "n1") in [
        (e["kind"], e["node"]) for e in events(head, token=alice)
    ]
    assert not [s for s in seen(alice) if s[1] == "bobs"]  # nothing of bob's service
    assert {s for s in seen(bob) if s[0].startswith("service.")} == {
        ("service.created", "bobs"),
        ("service.scaled", "bobs"),
    }
    assert {s[1] for s in seen(head.admin_token) if s[0].startswith("service.")} == {"alices", "bobs"}
