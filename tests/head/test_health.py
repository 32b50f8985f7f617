"""Unhealthy GPUs and nodes get no work, and the jobs they hold are requeued."""


def sample(index, ecc=0, xid=0):
    return {
        "index": index,
        "utilization": 50.0,
        "memory_used_mb": 10,
        "temperature_c": 50.0,
        "power_w": 100.0,
        "ecc_uncorrectable": ecc,
        "xid_errors": xid,
    }


def beat(head, agent, tasks=(), samples=(), health_problem=""):
    response = head.client.post(
        f"/v1/agents/{agent.name}/heartbeat",
        json={
            "tasks": list(tasks),
            "applied_version": agent.applied,
            "samples": list(samples),
            "health_problem": health_problem,
        },
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    assert response.status_code == 200, response.text
    agent.applied = response.json()["version"]
    return response.json()


def test_a_gpu_with_ecc_errors_is_left_out_and_its_job_requeued(head):
    agent = head.register("n1", gpus=2)
    job = head.submit({"command": "train", "resources": {"gpus": 1}, "max_restarts": 0})
    head.cycle()
    [task] = agent.tasks()
    assert task["gpus"] == [0]
    beat(head, agent, [head.running(task)], [sample(0, ecc=2), sample(1)])
    after = head.job(job["id"])
    assert after["state"] == "PENDING"
    assert after["restarts"] == 1
    assert "GPU 0 on n1 is unhealthy: 2 uncorrectable ECC errors" in after["reason"]
    node = head.nodes()["n1"]
    assert [g["healthy"] for g in node["gpus"]] == [False, True]
    assert node["gpus"][0]["problem"] == "2 uncorrectable ECC errors"
    # The old attempt ends; the new one must avoid GPU 0.
    beat(head, agent, [head.exited(task, 143)], [sample(0, ecc=2), sample(1)])
    assert head.cycle().placed == 1
    [new] = agent.tasks()
    assert new["gpus"] == [1]


def test_xid_errors_make_a_gpu_unhealthy_too(head):
    agent = head.register("n1", gpus=1)
    beat(head, agent, samples=[sample(0, xid=1)])
    head.submit({"command": "x", "resources": {"gpus": 1}})
    assert head.cycle().placed == 0
    assert head.client.get("/v1/status", headers=head.admin).json()["gpus_free"] == 0


def test_a_failing_health_command_takes_the_node_out_until_it_passes(head):
    agent = head.register("n1", gpus=2)
    job = head.submit({"command": "train", "resources": {"gpus": 1}})
    head.cycle()
    [task] = agent.tasks()
    beat(head, agent, [head.running(task)], health_problem="health command `check` exited 1: disk full")
    assert head.job(job["id"])["state"] == "PENDING"
    node = head.nodes()["n1"]
    assert node["state"] == "NOT_READY"
    assert "disk full" in node["reason"]
    beat(head, agent, [head.exited(task, 143)], health_problem="health command `check` exited 1: disk full")
    assert head.cycle().placed == 0
    beat(head, agent)
    assert head.nodes()["n1"]["state"] == "READY"
    assert head.cycle().placed == 1
