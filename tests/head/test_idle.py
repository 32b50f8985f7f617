"""Idle GPUs through the head: flagged in the reason, an event and a metric; warned, then cancelled."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from corral.head.services.idle import check_idle


def beat(head, agent, tasks, utilization):
    samples = [
        {"index": i, "utilization": utilization, "memory_used_mb": 10, "temperature_c": 40.0, "power_w": 80.0}
        for i in range(2)
    ]
    body = {"tasks": [head.running(t) for t in tasks], "applied_version": agent.applied, "samples": samples}
    response = head.client.post(f"/v1/agents/{agent.name}/heartbeat", json=body, headers=head.auth(agent.token))
    assert response.status_code == 200, response.text
    agent.applied = response.json()["version"]


def run_quiet(head, agent, tasks, seconds, utilization=1.0):
    for _ in range(seconds // 5):
        head.clock.advance(5)
        beat(head, agent, tasks, utilization)


def idle_gauge(head):
    text = head.client.get("/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name == "corral_job_idle_gpus":
            return {s.labels["job"]: (s.value, s.labels["team"]) for s in family.samples}
    raise AssertionError("no corral_job_idle_gpus family")


def events(head, job_id):
    response = head.client.get("/v1/events", params={"job": job_id}, headers=head.admin)
    return [e for e in response.json() if e["kind"] in ("job.idle", "job.busy", "job.cancelled")]


def start(head):
    agent = head.register("n1", gpus=2)
    job_id = head.submit({"command": "train", "resources": {"gpus": 2}, "team": "vision"})["id"]
    head.cycle()
    tasks = agent.tasks()
    beat(head, agent, tasks, 0.0)
    assert head.job(job_id)["state"] == "RUNNING"
    return agent, job_id, tasks


@pytest.fixture
def flagging(tmp_path, clock, start_head):
    with start_head(tmp_path / "home", clock, idle_after_s=60.0) as head:
        yield head


def test_an_idle_job_is_flagged_then_cleared_when_busy(flagging):
    head = flagging
    agent, job_id, tasks = start(head)
    run_quiet(head, agent, tasks, 55)
    assert check_idle(head.rt) == []
    run_quiet(head, agent, tasks, 5)
    [decision] = check_idle(head.rt)
    assert decision.action == "flag"
    job = head.job(job_id)
    assert job["state"] == "RUNNING"
    assert "idle: 2 GPU(s) under 5% utilization since" in job["reason"]
    assert idle_gauge(head) == {job_id: (2.0, "vision")}
    assert [e["kind"] for e in events(head, job_id)] == ["job.idle"]
    assert check_idle(head.rt) == []  # flagged once

    run_quiet(head, agent, tasks, 5, utilization=80.0)
    assert [d.action for d in check_idle(head.rt)] == ["clear"]
    assert "idle" not in head.job(job_id)["reason"]
    assert idle_gauge(head) == {}
    assert [e["kind"] for e in events(head, job_id)] == ["job.idle", "job.busy"]


def test_idle_cancel_warns_then_cancels_after_the_grace(tmp_path, clock, start_head):
    with start_head(tmp_path / "home", clock, idle_after_s=60.0, idle_action="cancel", idle_grace_s=120.0) as head:
        agent, job_id, tasks = start(head)
        run_quiet(head, agent, tasks, 60)
        assert [d.action for d in check_idle(head.rt)] == ["flag"]
        assert "will be cancelled at" in head.job(job_id)["reason"]
        run_quiet(head, agent, tasks, 115)
        assert check_idle(head.rt) == []
        run_quiet(head, agent, tasks, 5)
        assert [d.action for d in check_idle(head.rt)] == ["cancel"]
        job = head.job(job_id)
        assert job["state"] == "CANCELLED"
        assert job["reason"].startswith("cancelled: its 2 GPU(s) stayed under 5% utilization")
        assert [e["kind"] for e in events(head, job_id)] == ["job.idle", "job.cancelled"]


def test_a_warning_survives_a_restart_of_the_head(tmp_path, clock, start_head):
    options = {"idle_after_s": 60.0, "idle_action": "cancel", "idle_grace_s": 30.0}
    home = tmp_path / "home"
    with start_head(home, clock, **options) as head:
        agent, job_id, tasks = start(head)
        run_quiet(head, agent, tasks, 60)
        assert [d.action for d in check_idle(head.rt)] == ["flag"]
        token = agent.token
    with start_head(home, clock, **options) as head:
        agent = head.agents.setdefault("n1", type(agent)(head, "n1", token, applied=agent.applied))
        run_quiet(head, agent, tasks, 30)
        assert [d.action for d in check_idle(head.rt)] == ["cancel"]
        assert head.job(job_id)["state"] == "CANCELLED"


def test_idle_watch_can_be_off(tmp_path, clock, start_head):
    with start_head(tmp_path / "home", clock, idle_after_s=None) as head:
        agent, _, tasks = start(head)
        run_quiet(head, agent, tasks, 600)
        assert check_idle(head.rt) == []
