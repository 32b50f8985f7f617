"""Jobs with ``image:`` run in a real podman container: mounts, variables, exit codes, stopping,
and no container left behind; an agent without a runtime gets none, and the head refuses them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from corral.testing.net import free_port

pytestmark = pytest.mark.e2e

GRACE_S = 2.0


def _submit(cluster, spec: str, name: str) -> str:
    path = cluster.workspace / f"{name}.yaml"
    path.write_text(spec)
    job_id = cluster.json("submit", str(path))["id"]
    cluster.submitted.append(job_id)
    return job_id


def _no_container_left(cluster, podman) -> None:
    # podman's own clean-up of a container that ran with --rm may still be listing it for a moment
    cluster.wait_for(lambda: podman.containers() == [], 5, "no corral container to be left", interval_s=0.1)


def _agent_log(cluster) -> str:
    return (cluster.home / "logs" / "agent-boxed.log").read_text()


def _logs_say(cluster, job_id: str, text: str) -> bool:
    return text in cluster.api_logs(job_id)


@pytest.mark.timeout(90)
def test_a_job_runs_in_its_image_with_its_volumes_and_variables(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    inputs, outputs = cluster.workspace / "in", cluster.workspace / "out"
    inputs.mkdir()
    outputs.mkdir()
    (inputs / "hello.txt").write_text("hello from the host\n")
    command = (
        "test -e /etc/os-release && echo on-the-host; busybox | head -1; cat /in/hello.txt; "
        "touch /in/x 2>/dev/null && echo in-is-writable || echo in-is-read-only; "
        'echo "rank=$RANK of $WORLD_SIZE job=$CORRAL_JOB_ID gpus=$CUDA_VISIBLE_DEVICES '
        'marker=${CORRAL_TASK_MARKER:-none} home=${CORRAL_HOME:-none} pwd=$(pwd)" > /out/result.txt'
    )
    job_id = _submit(
        cluster,
        f"name: boxed\nimage: {podman.image}\ncommand: '{command}'\nresources: {{gpus: 1}}\n"
        f"volumes: ['{inputs}:/in:ro', '{outputs}:/out']\n",
        "boxed",
    )
    cluster.wait_ok(job_id, timeout=60)

    logs = cluster.ok("logs", job_id)
    assert "on-the-host" not in logs, "the command ran on the host, not in the image"
    assert "BusyBox v" in logs
    assert "hello from the host" in logs
    assert "in-is-read-only" in logs
    job = cluster.show(job_id)
    assert (outputs / "result.txt").read_text().split() == [
        "rank=0",
        "of",
        "1",
        f"job={job_id}",
        f"gpus={job['allocation'][0]['gpus'][0]}",  # fake GPUs: no device passed, the host's index kept
        "marker=none",  # the agent's own bookkeeping stays outside
        "home=none",  # and so does the agent's environment
        f"pwd={cluster.workspace}",  # the directory submitted from, mounted at the same path
    ]
    _no_container_left(cluster, podman)


@pytest.mark.timeout(60)
def test_the_exit_code_of_the_container_is_the_jobs(podman_cluster):
    control, podman = podman_cluster
    job_id = _submit(control.cluster, f"image: {podman.image}\ncommand: [sh, -c, 'exit 3']\n", "exit3")
    assert control.cluster.wait(job_id, timeout=60).returncode == 1
    job = control.cluster.show(job_id)
    assert (job["state"], job["exit_code"]) == ("FAILED", 3)
    _no_container_left(control.cluster, podman)


@pytest.mark.timeout(60)
def test_corral_run_takes_an_image_and_volumes(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    shared = cluster.workspace / "shared"
    shared.mkdir()
    (shared / "note.txt").write_text("mounted\n")
    job_id = cluster.run("--image", podman.image, "--volume", f"{shared}:/shared:ro", command="cat /shared/note.txt")
    cluster.wait_ok(job_id, timeout=60)
    assert cluster.ok("logs", job_id) == "mounted\n"
    assert cluster.show(job_id)["image"] == podman.image
    assert podman.image in cluster.ok("show", job_id)

    refused = cluster.cli("run", "--image", podman.image, "--volume", "shared:/shared", "--", "true")
    assert refused.returncode == 2
    assert "--volume (volumes[0]): the host path must be absolute" in refused.stderr


@pytest.mark.timeout(60)
def test_cancel_passes_sigterm_into_the_container_once_and_leaves_no_container(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    command = "trap 'echo got-term; exit 0' TERM; echo started; while true; do sleep 0.1; done"
    job_id = _submit(cluster, f'image: {podman.image}\ncommand: "{command}"\n', "graceful")
    cluster.wait_for(lambda: _logs_say(cluster, job_id, "started"), 30, "the container to start")
    assert [name.split("-r")[-1] for name in podman.containers()] == ["0"]

    assert cluster.cli("cancel", job_id).returncode == 0
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "CANCELLED", 20, "the job to be cancelled")
    cluster.wait_for(lambda: podman.containers() == [], 10, "the container to be removed")
    cluster.wait_for(lambda: _logs_say(cluster, job_id, "got-term"), 10, "the job's last words")
    assert cluster.ok("logs", job_id).count("got-term") == 1


@pytest.mark.timeout(60)
def test_a_container_that_ignores_sigterm_is_killed_after_the_grace_period(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    command = "trap '' TERM; echo started; while true; do sleep 0.1; done"
    job_id = _submit(cluster, f'image: {podman.image}\ncommand: "{command}"\n', "stubborn")
    cluster.wait_for(lambda: _logs_say(cluster, job_id, "started"), 30, "the container to start")

    started = time.monotonic()
    assert cluster.cli("cancel", job_id).returncode == 0
    cluster.wait_for(lambda: podman.containers() == [], GRACE_S + 15, "the container to be removed", interval_s=0.1)
    took = time.monotonic() - started
    assert took >= GRACE_S, f"removed {took:.2f}s after the cancel: the grace period was cut short"
    assert took < GRACE_S + 6, f"removed only {took:.2f}s after the cancel"
    assert cluster.show(job_id)["state"] == "CANCELLED"


@pytest.mark.timeout(60)
def test_a_container_past_its_time_limit_is_stopped_and_removed(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    command = "trap '' TERM; echo started; while true; do sleep 0.1; done"
    job_id = _submit(
        cluster, f'image: {podman.image}\ncommand: "{command}"\ntime_limit: 2s\ngrace_period: 1s\n', "overtime"
    )
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "TIMEOUT", 30, "the time limit")
    cluster.wait_for(lambda: podman.containers() == [], 15, "the container to be removed", interval_s=0.2)


@pytest.mark.timeout(90)
def test_a_container_left_by_a_dead_agent_is_stopped_by_the_next_one(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    command = "trap '' TERM; echo started; while true; do sleep 0.1; done"
    job_id = _submit(cluster, f'image: {podman.image}\ncommand: "{command}"\n', "orphan")
    cluster.wait_for(lambda: _logs_say(cluster, job_id, "started"), 30, "the container to start")

    control.kill_agent("boxed")
    assert cluster.cli("cancel", job_id).returncode == 0  # the head no longer wants it; no agent hears it
    assert len(podman.containers()) == 1
    control.restart_agent("boxed")  # adopts the task it finds running, only to stop it
    cluster.wait_for(lambda: podman.containers() == [], GRACE_S + 30, "the container to be removed", interval_s=0.2)
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "CANCELLED", 20, "the job to end")


@pytest.mark.timeout(90)
def test_a_container_still_wanted_is_kept_by_the_next_agent_and_its_exit_code_reported(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    flag = cluster.workspace / "finish"
    command = f"echo started; while [ ! -e {flag} ]; do sleep 0.1; done; exit 4"
    job_id = _submit(cluster, f'image: {podman.image}\ncommand: "{command}"\n', "kept")
    cluster.wait_for(lambda: _logs_say(cluster, job_id, "started"), 30, "the container to start")

    control.kill_agent("boxed")
    control.restart_agent("boxed")  # finds the rank running, the head still wants it: adopted, not swept
    cluster.wait_for(
        lambda: "re-adopting" in (cluster.home / "logs" / "agent-boxed.log").read_text(), 30, "the re-adoption"
    )
    assert len(podman.containers()) == 1
    flag.touch()
    assert cluster.wait(job_id, timeout=30).returncode == 1
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"]) == ("FAILED", 4)
    cluster.wait_for(lambda: podman.containers() == [], 10, "the container to be gone")


@pytest.mark.timeout(90)
def test_a_container_whose_rank_died_with_its_agent_is_removed_by_the_next_agent(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    job_id = _submit(cluster, f"image: {podman.image}\ncommand: sleep 300\n", "power-cut")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the job to run")
    cluster.wait_for(lambda: len(podman.containers()) == 1, 30, "the container to start")

    # The agent, the rank and the container's processes die; podman usually still lists the container
    # (its own clean-up may also get there first, which is as good). So that the next agent always has
    # one to sweep, another container of the node's is left behind as the dead agent could have left it.
    # The containers this test makes are named for this run (a run interrupted before it removed them
    # must not make the next one fail), and go whatever happens.
    control.kill_node("boxed")
    run = cluster.home.name.rpartition("-")[2]
    left_behind, foreign = f"corral-left-behind-{run}", f"corral-foreign-{run}"
    try:
        owner = f"boxed@{(cluster.home / 'agents' / 'boxed').resolve()}"
        left = podman.podman(
            "create", "--name", left_behind, "--label", f"corral.task={left_behind}",
            "--label", f"corral.node={owner}", podman.image, "sleep", "300",
        )  # fmt: skip
        assert left.returncode == 0, left.stderr
        # A node of the same name in another cluster on this host (another work directory): not this agent's.
        other = podman.podman(
            "create", "--name", foreign, "--label", f"corral.task={foreign}",
            "--label", "corral.node=boxed@/elsewhere/agents/boxed", podman.image, "sleep", "300",
        )  # fmt: skip
        assert other.returncode == 0, other.stderr
        control.restart_agent("boxed")
        cluster.wait_for(lambda: podman.containers() == [], 30, "the node's containers to be removed", interval_s=0.2)
        # The agent logs what it removed once the last removal is done: that may be a moment after podman
        # stops listing the container.
        cluster.wait_for(
            lambda: f"removed container {left_behind}, left by an earlier agent" in _agent_log(cluster),
            10,
            "the agent to log the container it removed",
        )
        assert podman.podman("container", "exists", foreign).returncode == 0, "another cluster's container went"
        assert podman.podman("rm", "-f", foreign).returncode == 0
    finally:
        podman.podman("rm", "-f", "--ignore", left_behind, foreign)
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] != "RUNNING", 30, "the lost job to end")


def test_the_agent_says_which_runtime_it_uses(podman_cluster):
    control, _ = podman_cluster
    log = (control.cluster.home / "logs" / "agent-boxed.log").read_text()
    assert "running jobs with an image through podman" in log
    (node,) = control.cluster.json("nodes")
    assert node["container_runtime"] == "podman"
    assert "podman" in control.cluster.ok("nodes")


@pytest.mark.timeout(150)
def test_a_service_replica_serves_from_its_container_through_the_gateway(podman_cluster):
    control, podman = podman_cluster
    cluster = control.cluster
    site = cluster.workspace / "site"
    site.mkdir()
    (site / "index.html").write_text("served from a container\n")
    spec = {
        "kind": "service",
        "name": "site",
        "image": podman.image,
        "command": "httpd -f -p $PORT -h /www",
        "volumes": [f"{site}:/www:ro"],
        "readiness": {"path": "/index.html", "hold": "90s"},  # a cold start on a busy machine
    }
    path = cluster.workspace / "site.yaml"
    path.write_text(json.dumps(spec))
    assert cluster.ok("serve", str(path)).strip() == "site"
    try:
        with urllib.request.urlopen(f"{cluster.url}/s/site/index.html", timeout=100) as response:
            assert response.read() == b"served from a container\n"
            assert response.headers["X-Corral-Replica"]
    finally:
        cluster.ok("service", "delete", "site")
    cluster.wait_for(lambda: podman.containers() == [], 30, "the replica's container to be removed")


@pytest.mark.timeout(90)
def test_a_gang_meets_at_master_addr_across_containers(podman_gang_cluster):
    cluster, podman = podman_gang_cluster
    # Rank 0 hands the connection to `cat`: a bare `nc -l` with no input half-closes the connection at
    # once, and a client that sees that before it has read its own input exits 0 without sending.
    command = (
        'if [ "$NODE_RANK" = 0 ]; then nc -l -p "$MASTER_PORT" -e sh -c "cat >&2"; '
        "else for i in $(seq 1 300); do "
        'echo "hello from rank $RANK of $WORLD_SIZE" | nc "$MASTER_ADDR" "$MASTER_PORT" && exit 0; sleep 0.2; '
        "done; exit 1; fi"
    )
    spec = {"name": "gang", "image": podman.image, "command": command, "nodes": 2, "resources": {"gpus": 1}}
    job_id = _submit(cluster, json.dumps(spec), "gang")
    cluster.wait_ok(job_id, timeout=60)
    logs = cluster.wait_for(
        lambda: (text := cluster.ok("logs", job_id)) == "hello from rank 1 of 2\n" or text or None,
        30,
        "rank 0 to log what rank 1 sent",
    )
    assert logs is True, f"rank 0 logged {logs!r}"
    assert sorted(a["node"] for a in cluster.show(job_id)["allocation"]) == ["g1", "g2"]  # never g0: no runtime
    _no_container_left(cluster, podman)


@pytest.mark.timeout(90)
def test_a_gang_whose_rank_fails_is_torn_down_with_its_containers(podman_gang_cluster):
    cluster, podman = podman_gang_cluster
    command = 'if [ "$NODE_RANK" = 1 ]; then sleep 1; exit 5; fi; trap "" TERM; while true; do sleep 0.1; done'
    spec = {"image": podman.image, "command": command, "nodes": 2, "resources": {"gpus": 1}, "grace_period": "1s"}
    job_id = _submit(cluster, json.dumps(spec), "teardown")
    assert cluster.wait(job_id, timeout=60).returncode == 1
    job = cluster.show(job_id)
    assert (job["state"], job["exit_code"]) == ("FAILED", 5)
    cluster.wait_for(lambda: podman.containers() == [], 15, "both containers to be removed", interval_s=0.2)


@pytest.mark.timeout(60)
def test_without_a_runtime_on_any_node_an_image_job_is_refused_at_submit(runtimeless_cluster):
    cluster = runtimeless_cluster
    path = cluster.workspace / "image.yaml"
    path.write_text("image: busybox\ncommand: echo hi\n")
    result = cluster.cli("submit", str(path))
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr}"
    assert result.stdout == ""
    assert "image" in result.stderr
    assert "no node has a container runtime" in result.stderr
    assert "--runtime" in result.stderr
    with cluster.client() as client:
        assert client.jobs(include_all=True) == []
    (node,) = cluster.json("nodes")
    assert node["container_runtime"] == ""


@pytest.mark.timeout(120)
def test_corral_up_passes_the_runtime_to_its_agents(tmp_path):
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
    env.pop("CORRAL_HEAD", None)
    env.pop("CORRAL_TOKEN", None)

    def corral(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "corral", *args], capture_output=True, text=True, env=env, timeout=90, check=False
        )

    if shutil.which("enroot") is None:
        missing = corral("up", "--runtime", "enroot", "--port", str(free_port()))
        assert missing.returncode == 2
        assert "--runtime: enroot is not on PATH" in missing.stderr
    started = corral("up", "--agents", "1", "--runtime", "none", "--port", str(free_port()))
    try:
        assert started.returncode == 0, started.stderr
        (node,) = json.loads(corral("nodes", "-o", "json").stdout)
        assert node["container_runtime"] == ""
        job = tmp_path / "image.yaml"
        job.write_text("image: busybox\ncommand: echo hi\n")
        refused = corral("submit", str(job))
        assert refused.returncode == 2
        assert "no node has a container runtime" in refused.stderr
    finally:
        assert corral("down").returncode == 0
