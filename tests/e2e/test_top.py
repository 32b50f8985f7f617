"""`corral top -o json`: one frame of the live view as one JSON document, from a real head."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_top_as_json_is_one_frame_of_nodes_and_the_live_queue(quick_cluster):
    cluster = quick_cluster
    running = cluster.run("--gpus", "1", command="sleep 60")
    cluster.wait_for(lambda: cluster.api_job(running)["state"] == "RUNNING", 30, "the first job to start")
    waiting = cluster.run("--gpus", "1", command="true")
    try:
        frame = cluster.json("top")
        assert {"at", "nodes", "jobs", "running", "pending"} <= frame.keys()
        assert [n["name"] for n in frame["nodes"]] == ["solo"]
        assert frame["nodes"][0]["gpus"][0]["allocated_to"] == running
        assert [(j["id"], j["state"]) for j in frame["jobs"]] == [(running, "RUNNING"), (waiting, "PENDING")]
        assert (frame["running"], frame["pending"]) == (1, 1)
        assert frame["at"][-1] == frame["jobs"][0]["submitted_at"][-1] == "Z"  # times written one way
    finally:
        cluster.ok("cancel", running, waiting)
