"""``corral why`` through the CLI: the table and the JSON document."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_why_names_each_node_group_and_its_verdict(cluster):
    holder = cluster.run("--gpus", "4", command="sleep 30")
    cluster.wait_for(lambda: cluster.api_job(holder)["state"] == "RUNNING", 30, "the holder to run")
    out = cluster.json("why", holder)
    assert out["job_id"] == holder and out["nodes_needed"] == 1
    verdicts = {g["filter"]: g for g in out["groups"]}
    assert verdicts["free"]["message"] == "needs 4 free GPUs; 0 free now"  # the node it holds
    assert verdicts["fits"]["message"] == "fits now"
    assert sorted(verdicts["free"]["nodes"] + verdicts["fits"]["nodes"]) == sorted(
        n["name"] for n in cluster.json("nodes")
    )
    text = cluster.ok("why", holder)
    assert "needs 4 free GPUs; 0 free now" in text and "CHECK" in text
    assert cluster.cli("why", "j-nosuchjb").returncode == 4
