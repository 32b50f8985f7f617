"""The head is late, not the node: a head whose database is held up must not declare a node lost
whose heartbeat it holds unanswered, and must still declare one whose agent fell silent."""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from corral.testing.audit import all_events
from corral.testing.procs import wait_for

pytestmark = pytest.mark.e2e

FAST = ["--heartbeat-interval", "0.5", "--node-timeout", "3", "--agent-lease", "30"]
STALL_S = 6.0  # twice the node timeout; well within the agents' request timeout and lease


def hold_database(path: str, seconds: float) -> None:
    """Take the database's write lock and keep it: every write of the head waits (another process
    busy with the database, a long transaction)."""
    connection = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        connection.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        connection.execute("ROLLBACK")
    finally:
        connection.close()


@pytest.mark.timeout(120)
def test_a_stalled_head_keeps_a_node_whose_heartbeat_it_holds_and_loses_a_silent_one(make_cluster):
    cluster = make_cluster(FAST)
    cluster.start_agent("busy", "1xH100:80GB")
    cluster.start_agent("silent", "1xH100:80GB")
    cluster.wait_ready("busy", "silent")
    with cluster.client() as client:
        # Short tasks ending all the time: every heartbeat of their node brings news, so the head
        # handles it in full (a write), and the node's heartbeat waits for the database with the head.
        ids = client.submit_batch([{"command": "sleep 0.2", "name": f"churn-{i}"} for i in range(150)])
        wait_for(
            lambda: len(client.jobs(include_all=True, states=["SUCCEEDED"], limit=20)) >= 10,
            60,
            "the tasks to churn",
            interval_s=0.2,
        )
        os.kill(cluster.daemons["silent"].pid, signal.SIGSTOP)  # this agent falls silent for good
        try:
            time.sleep(1.5)  # its last heartbeats have reached the database
            stalled_at = time.monotonic()
            hold_database(str(cluster.home / "corral.db"), STALL_S)
            wait_for(
                lambda: {n["name"]: n["state"] for n in client.nodes()}["silent"] == "NOT_READY",
                15,
                "the silent node to be declared lost",
                interval_s=0.2,
            )
            assert time.monotonic() - stalled_at < STALL_S + 10
            time.sleep(4)  # more than the node timeout after the stall
            states = {n["name"]: n["state"] for n in client.nodes()}
            lost = [e for e in all_events(client) if e["kind"] == "node.not_ready"]
            assert states["busy"] == "READY", cluster.log("head")
            assert [e.get("node") for e in lost] == ["silent"], lost
            assert len(ids) == 150
        finally:
            os.kill(cluster.daemons["silent"].pid, signal.SIGCONT)
