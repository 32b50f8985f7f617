"""``corral up`` is idempotent, and ``corral down`` then ``corral up`` resumes the cluster with its history."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e

NODE_TIMEOUT_S = 10.0  # the head's default, as `corral up` starts it


def _daemons(cluster) -> dict[int, str]:
    return {
        pid: cmd for pid, cmd in cluster.processes().items() if " -m corral head " in cmd or " -m corral agent " in cmd
    }


def _summary(job) -> tuple:
    return (job["id"], job["state"], job["exit_code"], job["restarts"], job["finished_at"])


@pytest.mark.timeout(120)
def test_up_is_idempotent_and_down_up_keeps_finished_jobs(cluster):
    ok = cluster.run("--gpus", "1", command="echo kept")
    bad = cluster.run("--gpus", "2", command="exit 3")
    assert cluster.wait(ok, bad).returncode == 1
    before = {j["id"]: j for j in cluster.json("jobs", "--all") if j["id"] in (ok, bad)}
    assert (before[ok]["state"], before[bad]["state"], before[bad]["exit_code"]) == ("SUCCEEDED", "FAILED", 3)

    daemons = _daemons(cluster)
    assert len(daemons) == 3, daemons  # one head, two agents
    again = cluster.cli("up", "--agents", "2", "--fake-gpus", "4xH100:80GB")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == cluster.url
    assert _daemons(cluster) == daemons, "a second `corral up` must not start anything"
    assert again.stderr == ""
    fewer = cluster.cli("up", "--agents", "1")
    assert fewer.returncode == 0, fewer.stderr
    assert "2 agents already run (asked for 1)" in fewer.stderr
    differing = cluster.cli("up", "--fake-gpus", "2xL4:24GB")
    assert differing.returncode == 2, differing.stderr
    assert "the 2 running agent(s) have 4xH100:80GB" in differing.stderr and "`corral down` first" in differing.stderr
    assert _daemons(cluster) == daemons

    survivor = cluster.run("--gpus", "1", "--max-restarts", "0", command="sleep 3")
    deadline = time.monotonic() + 30
    while cluster.api_job(survivor)["state"] != "RUNNING":
        assert time.monotonic() < deadline, cluster.show(survivor)
        time.sleep(0.2)

    down = cluster.cli("down")
    assert down.returncode == 0, down.stderr
    assert cluster.processes() == {}, "corral down left processes running"
    assert cluster.cli("jobs").returncode == 3

    time.sleep(NODE_TIMEOUT_S + 0.5)  # down for longer than the node timeout: no node may be declared lost for it
    up = cluster.cli("up")  # no options: the same port, agents and GPUs as before
    assert up.returncode == 0, up.stderr
    assert up.stdout.strip() == cluster.url
    restarted = _daemons(cluster)
    assert len(restarted) == 3, restarted
    assert not set(restarted) & set(daemons)

    after = {j["id"]: j for j in cluster.json("jobs", "--all") if j["id"] in (ok, bad)}
    assert {k: _summary(j) for k, j in after.items()} == {k: _summary(j) for k, j in before.items()}
    shown = cluster.show(bad)
    assert (shown["state"], shown["exit_code"]) == ("FAILED", 3)
    assert "exit code 3" in shown["reason"]
    assert cluster.ok("logs", ok) == "kept\n"

    # Stopped by `down`, it runs again after `up`: an interruption spends no restart budget, and no
    # attempt was placed on a node whose agent was leaving.
    cluster.wait_ok(survivor)
    assert cluster.show(survivor)["restarts"] == 1

    nodes = cluster.json("nodes")
    assert sorted(n["name"] for n in nodes) == ["local-1", "local-2"]
    assert all(len(n["gpus"]) == 4 and {g["type"] for g in n["gpus"]} == {"H100"} for n in nodes)
    fresh = cluster.run("--nodes", "2", "--gpus", "4", command="echo $CORRAL_NODE")
    cluster.wait_ok(fresh)


@pytest.mark.timeout(120)
def test_up_counts_a_drained_node_as_up(cluster):
    names = [n["name"] for n in cluster.json("nodes")]
    drained = names[-1]
    cluster.ok("drain", drained, "--reason", "maintenance")
    try:
        started = time.monotonic()
        again = cluster.cli("up")
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == cluster.url
        assert time.monotonic() - started < 15  # not the 30 s wait for a node that never comes
        assert cluster.cli("down").returncode == 0
        up = cluster.cli("up")
        assert up.returncode == 0, up.stderr
        states = {n["name"]: n["state"] for n in cluster.json("nodes")}
        assert states[drained] == "DRAINED" and all(s == "READY" for n, s in states.items() if n != drained)
    finally:
        cluster.ok("undrain", drained)


def test_the_agents_up_starts_keep_the_join_token_off_their_command_lines(cluster):
    join_token = cluster.config()["join_token"]
    agents = {pid: cmd for pid, cmd in _daemons(cluster).items() if " -m corral agent " in cmd}
    assert agents
    assert not any(join_token in cmd for cmd in agents.values()), "anyone can read a command line in ps"
