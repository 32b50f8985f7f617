"""`corral drain` / `corral undrain` through the CLI."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
def test_drain_sends_new_jobs_elsewhere_until_undrained(cluster):
    try:
        node = cluster.json("drain", "local-1", "--reason", "maintenance")
        assert node["state"] == "DRAINED"
        assert "maintenance" in node["reason"]
        nodes = {n["name"]: n for n in cluster.json("nodes")}
        assert nodes["local-1"]["state"] == "DRAINED"
        ids = [cluster.run("--gpus", "1", command="true") for _ in range(3)]
        cluster.wait_ok(*ids)
        assert {cluster.show(j)["allocation"][0]["node"] for j in ids} == {"local-2"}
    finally:
        assert cluster.json("undrain", "local-1")["state"] == "READY"
    assert cluster.cli("drain", "no-such-node").returncode == 4
