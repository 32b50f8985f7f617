"""Reclaim in the head: GPUs an owner takes back from a borrower stay with the owner, cycle after cycle."""

from __future__ import annotations

import textwrap

import pytest

CONFIG = """
teams:
  ta: {members: [alice], quotas: {H100: {nominal: 8}}}
  tb: {members: [bob], quotas: {H100: {nominal: 4}}}
"""


@pytest.fixture
def configured(tmp_path, clock, start_head):
    path = tmp_path / "corral.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    with start_head(tmp_path / "home", clock, config_path=path) as head:
        yield head


def submit_as(head, user, spec):
    tokens = head.__dict__.setdefault("tokens", {})
    if user not in tokens:
        tokens[user] = head.user_token(user)
    return head.submit(spec, token=tokens[user])["id"]


def run_everything(head, agents, seen):
    """The agents report in, one scheduling cycle runs, then each agent starts the tasks it is given, and the
    processes of tasks it is told to stop exit at once. ``seen`` keeps every task an agent was given, by id."""
    for agent in agents:
        agent.beat([head.running(t) for t in agent.tasks()])
    result = head.cycle()
    for agent in agents:
        desired = agent.desired()
        seen.update((t["task_id"], t) for t in desired["tasks"])
        stopped = [head.exited(seen[t], 143) for t in desired.get("stop_grace_s", {}) if t in seen]
        agent.beat([*map(head.running, desired["tasks"]), *stopped])
    return result


@pytest.mark.parametrize("gpu_type", [None, ["H100", "A100"]], ids=["any type", "H100 or A100"])
def test_a_borrower_accepting_a_type_without_quota_is_reclaimed_once_and_not_placed_again(configured, gpu_type):
    head = configured
    h100 = [head.register(f"h{i}", gpus=4) for i in range(3)]
    a100 = head.register("x", gpus=4, gpu_type="A100")
    agents, seen = [*h100, a100], {}
    head.submit({"command": "fill", "resources": {"gpus": 4, "gpu_type": "A100"}})  # the A100 stays busy
    run_everything(head, agents, seen)
    fixed = submit_as(head, "bob", {"command": "h", "resources": {"gpus": 4, "gpu_type": "H100"}})
    run_everything(head, agents, seen)
    head.clock.advance(3600)  # the job below loses less work when preempted
    resources = {"gpus": 4} if gpu_type is None else {"gpus": 4, "gpu_type": gpu_type}
    borrower = submit_as(head, "bob", {"command": "any", "resources": resources, "priority": 5})  # goes first
    result = run_everything(head, agents, seen)
    assert result.placed == 1, head.job(borrower)["reason"]  # tb borrows 4 of ta's idle H100
    assert head.job(borrower)["state"] == "RUNNING"
    head.clock.advance(60)
    owners = [
        submit_as(head, "alice", {"command": f"own{i}", "resources": {"gpus": 4, "gpu_type": "H100"}}) for i in range(2)
    ]
    for _ in range(6):
        run_everything(head, agents, seen)
        head.clock.advance(1)
    for owner in owners:
        assert head.job(owner)["state"] == "RUNNING", head.job(owner)["reason"]
    job = head.job(borrower)
    assert (job["state"], job["preemptions"]) == ("PENDING", 1)
    assert job["reason"].startswith(f"preempted by job {owners[1]} (reclaiming team ta's quota from team tb)")
    assert head.job(fixed)["state"] == "RUNNING"
