"""Heartbeats that repeat the last one are answered from memory; anything new is handled in full."""

from sqlalchemy import select

from corral.head.store.tables import NodeRow


def last_heard(head, node):
    with head.rt.read() as session:
        return session.scalar(select(NodeRow.last_heartbeat).where(NodeRow.name == node))


def running_on_n1(head):
    n1 = head.register("n1", gpus=2)
    job = head.submit({"command": "train", "resources": {"gpus": 1}})["id"]
    head.cycle()
    [task] = n1.tasks()
    n1.beat([head.running(task)])
    n1.beat([head.running(task)])  # handled in full: the agent now acts on the newest version
    return n1, job, task


def test_a_repeated_heartbeat_gets_the_same_answer_and_its_time_is_written_in_a_batch(head):
    n1, _, task = running_on_n1(head)
    full = n1.beat([head.running(task)])
    before = last_heard(head, "n1")
    head.clock.advance(3)
    assert n1.beat([head.running(task)]) == full
    assert last_heard(head, "n1") == before  # answered from memory: nothing written yet
    head.cycle()  # a scheduling cycle (or the head's batch) writes the times it was told
    assert (last_heard(head, "n1") - before).total_seconds() == 3


def test_a_new_report_is_handled_in_full(head):
    n1, job, task = running_on_n1(head)
    n1.beat([head.running(task)])
    n1.beat([head.exited(task, 0)])
    assert head.job(job)["state"] == "SUCCEEDED"


def test_a_new_task_reaches_the_agent_in_the_next_answer(head):
    n1, _, task = running_on_n1(head)
    n1.beat([head.running(task)])
    second = head.submit({"command": "eval", "resources": {"gpus": 1}})["id"]
    head.cycle()
    answer = n1.beat([head.running(task)], applied=n1.applied)
    assert second in {t["job_id"] for t in answer["tasks"]}


def test_a_node_declared_lost_is_told_so_by_its_next_heartbeat(head):
    n1, _, task = running_on_n1(head)
    n1.beat([head.running(task)])
    head.clock.advance(11)
    assert head.check_nodes() == ["n1"]
    response = n1.heartbeat([head.running(task)])
    assert response.status_code == 409 and "declared lost" in response.json()["detail"]


def test_a_node_that_registered_again_no_longer_accepts_its_old_credential(head):
    n1, _, task = running_on_n1(head)
    n1.beat([head.running(task)])
    again = head.register("n1", gpus=2)
    assert again.token != n1.token
    assert n1.heartbeat([head.running(task)]).status_code == 403
    assert again.heartbeat([head.running(task)]).status_code == 200


def test_a_wrong_token_is_refused_even_for_a_repeated_heartbeat(head):
    n1, _, task = running_on_n1(head)
    n1.beat([head.running(task)])
    n1.token = "cn_not-the-token"
    assert n1.heartbeat([head.running(task)]).status_code == 403
