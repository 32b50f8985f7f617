"""A job's output through the head: agents ship each rank's log, users read the latest attempt's."""

from .conftest import auth


def ship(head, agent, task, data: bytes, offset: int = 0):
    job_id, generation = task["job_id"], task["generation"]
    url = f"/v1/agents/{agent.name}/logs/{job_id}/{generation}/0"
    response = head.client.put(url, params={"offset": offset}, content=data, headers=auth(agent.token))
    assert response.status_code == 200, response.text


def read(head, job_id, follow=False):
    params = {"follow": "true"} if follow else {}
    response = head.client.get(f"/v1/jobs/{job_id}/logs", params=params, headers=head.admin)
    assert response.status_code == 200, response.text
    return response.text


def first_attempt_failed(head):
    """A job whose first attempt printed a line and failed; its second attempt is placed."""
    agent = head.register("n1")
    job_id = head.submit({"command": "x", "max_restarts": 1})["id"]
    head.cycle()
    first = agent.tasks()[0]
    ship(head, agent, first, b"epoch 1\n")
    agent.beat([head.exited(first, 1)])
    head.cycle()
    return agent, job_id, agent.tasks()[0]


def test_the_latest_attempts_output_is_read(head):
    agent, job_id, second = first_attempt_failed(head)
    ship(head, agent, second, b"resumed\n")
    assert read(head, job_id) == "resumed\n"


def test_an_earlier_attempts_output_read_while_the_latest_printed_nothing_says_so(head):
    _, job_id, second = first_attempt_failed(head)
    assert second["generation"] == 1
    assert read(head, job_id) == (
        "--- attempt 0's output: attempt 1 (restart 1) has printed nothing yet ---\nepoch 1\n"
    )


def test_following_moves_on_from_an_earlier_attempts_output_to_the_latest(head):
    agent, job_id, second = first_attempt_failed(head)
    agent.beat([head.exited(second, 2)])  # no restarts left: the job ends, its second attempt silent
    assert head.job(job_id)["state"] == "FAILED"
    assert read(head, job_id, follow=True) == (
        "--- attempt 0's output: attempt 1 (restart 1) has printed nothing yet ---\nepoch 1\n"
        "\n--- attempt 1 (restart 1) ---\n"
    )
