"""``-o json``: exactly one JSON document on stdout, with the keys the CLI contract lists."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

pytestmark = pytest.mark.e2e

JOB_KEYS = {
    "id",
    "name",
    "state",
    "user",
    "team",
    "priority",
    "nodes",
    "gpus_per_node",
    "gpu_types",
    "submitted_at",
    "started_at",
    "finished_at",
    "exit_code",
    "restarts",
    "reason",
    "allocation",
}
NODE_KEYS = {"name", "state", "labels", "gpus", "last_heartbeat"}
GPU_KEYS = {"index", "type", "memory_mb", "allocated_to"}
STATUS_KEYS = {"head_url", "nodes_ready", "nodes_total", "gpus_free", "gpus_total"}


def _document(cluster, *args):
    """Run with ``-o json``; stdout must parse as one JSON document (json.loads rejects trailing data)."""
    result = cluster.cli(args[0], "-o", "json", *args[1:])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _check_job(job, job_id, state):
    assert set(job) >= JOB_KEYS, JOB_KEYS - set(job)
    assert job["id"] == job_id
    assert job["state"] == state
    for key in ("submitted_at", "started_at", "finished_at"):
        datetime.fromisoformat(job[key].replace("Z", "+00:00"))
    assert job["exit_code"] == 0
    assert job["restarts"] == 0
    assert job["nodes"] == 1
    assert job["gpus_per_node"] == 2
    assert job["gpu_types"] == ["H100"]
    assert job["team"] == "vision"
    assert job["priority"] == 3
    assert job["name"] == "shape"
    assert isinstance(job["user"], str) and job["user"]
    assert isinstance(job["reason"], str)
    [placed] = job["allocation"]
    assert {"node", "gpus"} <= set(placed)
    assert len(placed["gpus"]) == 2


@pytest.mark.timeout(60)
def test_json_shapes_of_run_submit_show_jobs_nodes_status_config(cluster):
    run = _document(
        cluster, "run", "--name", "shape", "--gpus", "2", "--gpu-type", "H100", "--team", "vision", "--priority", "3",
        "--", "true",
    )  # fmt: skip
    assert set(run) == {"id"}
    job_id = run["id"]
    cluster.submitted.append(job_id)

    job_file = cluster.workspace / "shape.yaml"
    job_file.write_text("name: filed\ncommand: [echo, filed]\n")
    submitted = _document(cluster, "submit", str(job_file))
    assert set(submitted) == {"id"}
    cluster.submitted.append(submitted["id"])
    cluster.wait_ok(job_id, submitted["id"])

    _check_job(_document(cluster, "show", job_id), job_id, "SUCCEEDED")
    listed = _document(cluster, "jobs")
    assert isinstance(listed, list)
    by_id = {j["id"]: j for j in listed}
    _check_job(by_id[job_id], job_id, "SUCCEEDED")
    assert all(set(j) >= JOB_KEYS for j in listed)
    assert submitted["id"] in {j["id"] for j in _document(cluster, "jobs", "--all")}
    succeeded = _document(cluster, "jobs", "--state", "SUCCEEDED")
    assert job_id in {j["id"] for j in succeeded}
    assert all(j["state"] == "SUCCEEDED" for j in succeeded)
    assert _document(cluster, "jobs", "--state", "RUNNING", "--state", "PENDING") == []

    nodes = _document(cluster, "nodes")
    assert sorted(n["name"] for n in nodes) == ["local-1", "local-2"]
    for node in nodes:
        assert set(node) >= NODE_KEYS, NODE_KEYS - set(node)
        assert node["state"] == "READY"
        assert isinstance(node["labels"], dict)
        assert [g["index"] for g in node["gpus"]] == [0, 1, 2, 3]
        for gpu in node["gpus"]:
            assert set(gpu) >= GPU_KEYS, GPU_KEYS - set(gpu)
            assert gpu["type"] == "H100"
            assert gpu["allocated_to"] is None
            assert 79_000 <= gpu["memory_mb"] <= 82_000

    status = _document(cluster, "status")
    assert set(status) >= STATUS_KEYS, STATUS_KEYS - set(status)
    assert status["head_url"] == cluster.url
    assert (status["nodes_ready"], status["nodes_total"]) == (2, 2)
    assert (status["gpus_free"], status["gpus_total"]) == (8, 8)

    config = _document(cluster, "config")
    assert config == {"head_url": cluster.url, "token": cluster.config()["token"]}


def test_json_of_up_join_token_and_dashboard(cluster):
    assert _document(cluster, "up") == {"head_url": cluster.url}  # already up: nothing starts
    assert _document(cluster, "join-token") == {"token": cluster.config()["join_token"]}
    url = _document(cluster, "dashboard")["url"]
    assert url.startswith(cluster.url + "/#token=")
