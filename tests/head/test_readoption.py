"""A restarted agent reports the tasks it found still running: the head keeps the ones it wants, and a
lost attempt the agent still runs holds its job back until the agent reports it gone."""


def placed(head, agent, **extra):
    job = head.submit({"command": "x", "resources": {"gpus": 2}, **extra})
    head.cycle()
    [task] = [t for t in agent.tasks() if t["job_id"] == job["id"]]
    return job["id"], task


def test_a_re_adopted_task_keeps_its_job_running_and_later_reports_its_exit(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent)
    agent.beat([head.running(task)])
    agent = head.register("n1", running=[head.running(task)])  # the agent restarted; the task ran on
    assert [t["task_id"] for t in agent.tasks()] == [task["task_id"]]
    assert (head.job(job_id)["state"], head.job(job_id)["restarts"]) == ("RUNNING", 0)
    agent.beat([head.exited(task, 0)])
    assert (head.job(job_id)["state"], head.job(job_id)["exit_code"]) == ("SUCCEEDED", 0)


def test_a_lost_attempt_reported_running_at_registration_is_fenced_only_once_it_is_gone(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent, max_restarts=1)
    agent.beat([head.running(task)])
    head.clock.advance(11)
    head.check_nodes()
    assert head.job(job_id)["restarts"] == 1
    # The agent restarted after the node was declared lost and found the old attempt still running.
    agent = head.register("n1", running=[head.running(task)])
    assert agent.tasks() == []  # not wanted: the agent stops it
    assert head.cycle().placed == 0  # and the next attempt waits until it has
    agent.beat([head.exited(task, 143, "stopped: the head no longer wants it")])
    assert head.cycle().placed == 1
    assert head.job(job_id)["restarts"] == 1


def test_a_task_that_ended_while_its_agent_was_away_is_reported_with_its_exit_status(head):
    agent = head.register("n1")
    job_id, task = placed(head, agent, max_restarts=1)
    agent.beat([head.running(task)])
    head.register("n1", running=[head.exited(task, 4, "exit code 4 while the agent was away")])
    job = head.job(job_id)
    assert (job["state"], job["restarts"]) == ("PENDING", 1)
    assert "exit code 4" in job["reason"] and "lost" not in job["reason"]
    assert head.free_gpus("n1") == list(range(8))
