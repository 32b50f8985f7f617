"""Job arrays and dependencies: what a pending job waits for besides resources."""

from __future__ import annotations


def finish(head, agent, job_id, code=0):
    """The job's task exits with ``code``; the agent's other tasks keep running."""
    tasks = agent.tasks()
    agent.beat([head.exited(t, code) if t["job_id"] == job_id else head.running(t) for t in tasks])


def array_jobs(head, array_id):
    return sorted((j for j in head.jobs() if j["array_id"] == array_id), key=lambda j: j["array_index"])


def test_an_array_runs_one_job_per_index_at_most_limit_at_once(head):
    n1 = head.register("n1", gpus=8)
    first = head.submit({"command": "work", "resources": {"gpus": 1}, "array": "0-4%2"})
    elements = array_jobs(head, first["id"])
    assert [j["array_index"] for j in elements] == [0, 1, 2, 3, 4]
    assert first["array_index"] == 0 and elements[0]["id"] == first["id"]

    assert head.cycle().placed == 2
    tasks = {t["job_id"]: t for t in n1.tasks()}
    assert set(tasks) == {elements[0]["id"], elements[1]["id"]}  # lowest indices first
    assert tasks[elements[1]["id"]]["env"]["CORRAL_ARRAY_INDEX"] == "1"
    assert tasks[elements[1]["id"]]["env"]["CORRAL_ARRAY_JOB_ID"] == first["id"]
    held = head.job(elements[2]["id"])
    assert held["reason"] == f"array {first['id']} already has 2 elements holding resources (its limit)"

    n1.beat([head.running(t) for t in tasks.values()])
    assert head.cycle().placed == 0  # still two running
    finish(head, n1, elements[0]["id"])
    assert head.cycle().placed == 1
    assert elements[2]["id"] in {t["job_id"] for t in n1.tasks()}


def test_a_cancelled_element_counts_against_the_limit_until_its_processes_are_gone(head):
    n1 = head.register("n1", gpus=8)
    first = head.submit({"command": "work", "resources": {"gpus": 1}, "array": "0-1%1"})
    elements = array_jobs(head, first["id"])
    assert head.cycle().placed == 1
    started = n1.tasks()
    n1.beat([head.running(t) for t in started])
    assert head.cancel(first["id"])["state"] == "CANCELLED"
    assert head.cycle().placed == 0  # element 0's task is still stopping: it holds its GPU
    held = head.job(elements[1]["id"])
    assert held["reason"] == f"array {first['id']} already has 1 element holding resources (its limit)"
    n1.beat([head.exited(t, 143) for t in started])  # its processes are gone
    assert head.cycle().placed == 1
    assert [t["job_id"] for t in n1.tasks()] == [elements[1]["id"]]


def test_cancelling_whole_arrays_ends_every_element_and_only_those(head):
    head.register("n1", gpus=8)
    first = head.submit({"command": "work", "resources": {"gpus": 1}, "array": "0-3%2"})
    other = head.submit({"command": "work", "resources": {"gpus": 1}, "array": "0-1"})
    single = head.submit({"command": "work"})
    head.cycle()
    elements = array_jobs(head, first["id"])
    body = {"ids": [elements[2]["id"], single["id"]], "whole_arrays": True}  # any element names its array
    response = head.client.post("/v1/jobs/cancel", json=body, headers=head.admin)
    assert response.status_code == 200, response.text
    assert [j["id"] for j in response.json()] == [*(e["id"] for e in elements), single["id"]]
    assert {head.job(e["id"])["state"] for e in elements} == {"CANCELLED"}
    assert head.job(single["id"])["state"] == "CANCELLED"
    assert all(j["state"] != "CANCELLED" for j in array_jobs(head, other["id"]))


def test_an_array_without_a_limit_starts_whatever_fits(head):
    head.register("n1", gpus=8)
    first = head.submit({"command": "work", "resources": {"gpus": 1}, "array": "1,3,5-7"})
    assert [j["array_index"] for j in array_jobs(head, first["id"])] == [1, 3, 5, 6, 7]
    assert head.cycle().placed == 5


def test_a_batch_expands_arrays_and_answers_every_id(head):
    head.register("n1", gpus=8)
    spec = {"command": "work", "resources": {"gpus": 1}}
    response = head.client.post("/v1/jobs/batch", json={"jobs": [{**spec, "array": "0-2"}, spec]}, headers=head.admin)
    assert response.status_code == 201, response.text
    ids = response.json()["ids"]
    assert len(ids) == 4
    assert [head.job(i)["array_index"] for i in ids] == [0, 1, 2, None]


def test_after_ok_waits_for_success_and_then_starts(head):
    n1 = head.register("n1", gpus=8)
    first = head.submit({"command": "prepare", "resources": {"gpus": 1}})["id"]
    second = head.submit({"command": "train", "resources": {"gpus": 1}, "after_ok": [first]})["id"]
    assert head.cycle().placed == 1
    assert head.job(second)["reason"] == f"waiting for dependency {first} (PENDING)"
    n1.run_all()
    head.cycle()
    assert head.job(second)["reason"] == f"waiting for dependency {first} (RUNNING)"
    assert head.job(second)["after_ok"] == [first]
    finish(head, n1, first)
    assert head.cycle().placed == 1
    assert second in {t["job_id"] for t in n1.tasks()}


def test_after_ok_cancels_the_job_when_a_dependency_fails(head):
    n1 = head.register("n1", gpus=8)
    first = head.submit({"command": "prepare", "resources": {"gpus": 1}})["id"]
    second = head.submit({"command": "train", "resources": {"gpus": 1}, "after_ok": [first]})["id"]
    third = head.submit({"command": "report", "resources": {"gpus": 1}, "after_any": [first]})["id"]
    head.cycle()
    n1.run_all()
    finish(head, n1, first, code=2)
    assert head.job(first)["state"] == "FAILED"
    assert head.cycle().placed == 1  # after_any: any end will do
    job = head.job(second)
    assert job["state"] == "CANCELLED"
    assert job["reason"] == f"dependency {first} ended FAILED; after_ok needs every dependency to succeed"
    assert third in {t["job_id"] for t in n1.tasks()}


def test_dependencies_must_name_jobs_the_submitter_can_see(head):
    head.register("n1", gpus=8)
    theirs = head.submit({"command": "x"}, token=head.user_token("bob"))["id"]
    alice = head.user_token("alice")
    for deps in (["j-doesnotexist"], [theirs]):
        response = head.client.post("/v1/jobs", json={"command": "y", "after_ok": deps}, headers=head.auth(alice))
        assert response.status_code == 422, response.text
        [detail] = response.json()["detail"]
        assert detail["field"] == "after_ok[0]"
        assert deps[0] in detail["msg"]


def test_a_retried_array_submit_returns_the_same_first_job(head):
    head.register("n1", gpus=8)
    spec = {"command": "work", "resources": {"gpus": 1}, "array": "0-3"}
    one = head.submit(spec, **{"Idempotency-Key": "k1"})
    response = head.client.post("/v1/jobs", json=spec, headers={**head.admin, "Idempotency-Key": "k1"})
    assert response.status_code == 200
    assert response.json()["id"] == one["id"]
    assert len(array_jobs(head, one["id"])) == 4


def test_an_element_held_for_an_earlier_one_that_cannot_start_says_so(head):
    head.register("n1", gpus=4)
    head.submit({"command": "busy", "resources": {"gpus": 2}})
    assert head.cycle().placed == 1
    first = head.submit({"command": "work", "resources": {"gpus": 4}, "array": "0-2%1"})  # fits no node now
    elements = array_jobs(head, first["id"])
    assert head.cycle().placed == 0
    assert head.job(first["id"])["reason"].startswith("waiting for 1 node with 4 free GPUs")
    for element in elements[1:]:
        assert head.job(element["id"])["reason"] == (
            f"array {first['id']} lets 1 element hold resources at once and has 0 holding them;"
            f" its elements submitted earlier start first ({first['id']})"
        )


def test_a_dependency_on_an_array_waits_for_every_element(head):
    n1 = head.register("n1", gpus=8)
    first = head.submit({"command": "work", "resources": {"gpus": 1}, "array": "0-2"})["id"]
    elements = [e["id"] for e in array_jobs(head, first)]
    after = head.submit({"command": "merge", "after_ok": [first]})["id"]
    anyway = head.submit({"command": "report", "after_any": [first]})["id"]
    assert head.cycle().placed == 3
    n1.run_all()
    finish(head, n1, first)  # the first element (the array's id) succeeds; the others still run
    assert head.cycle().placed == 0
    assert head.job(after)["reason"] == f"waiting for dependency {first} (an array: 2 of its 3 elements not ended)"
    finish(head, n1, elements[1])
    finish(head, n1, elements[2], code=1)
    assert head.cycle().placed == 1  # after_any: every element ended
    assert anyway in {t["job_id"] for t in n1.tasks()}
    job = head.job(after)
    assert job["state"] == "CANCELLED"
    assert job["reason"] == (
        f"dependency {first} (an array): its element {elements[2]} ended FAILED;"
        " after_ok needs every dependency to succeed"
    )
