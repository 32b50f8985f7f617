"""Several heads on one PostgreSQL: one leads (leader lease), all serve; SIGKILL the leader under load.

Real processes: a throw-away PostgreSQL server, two `corral head` processes, two `corral agent`
processes with fake GPUs that know both heads, and a client that knows both heads too.
"""

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict

import pytest
from sqlalchemy import create_engine, text

from corral.client.sdk import Client
from corral.testing.net import free_port
from corral.testing.postgres import PostgresServer, unavailable_reason
from corral.testing.procs import wait_for

pytestmark = pytest.mark.e2e
JOBS = 40


@pytest.fixture(scope="module")
def postgres():
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"several heads need PostgreSQL: {reason}")
    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()


class Cluster:
    def __init__(self, postgres, tmp_path):
        self.url = postgres.create_database("corral_ha")
        self.engine = create_engine(self.url)
        self.tmp = tmp_path
        self.procs = {}
        self.ports = {name: free_port() for name in ("a", "b")}
        self.heads = {name: f"http://127.0.0.1:{port}" for name, port in self.ports.items()}

    def spawn(self, name, *args):
        env = {**os.environ, "CORRAL_HOME": str(self.tmp / name)}
        with open(self.tmp / f"{name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "corral", *args], stdout=log, stderr=subprocess.STDOUT, env=env
            )

    def start_head(self, name):
        self.spawn(name, "head", "--db", self.url, "--port", str(self.ports[name]), "--grace", "1")

    def healthy(self, name):
        try:
            with socket.create_connection(("127.0.0.1", self.ports[name]), timeout=0.5):
                return True
        except OSError:
            return False

    def lease(self):
        with self.engine.connect() as connection:
            row = connection.execute(text("SELECT holder, token FROM leases WHERE name = 'leader'")).first()
        return (row[0], row[1]) if row else None

    def leader(self):
        held = self.lease()
        if held is None:
            return None
        return next((name for name in self.heads if held[0].endswith(str(self.tmp / name))), None)

    def admin_token(self, name):
        import json

        return json.loads((self.tmp / name / "client.json").read_text())["token"]

    def stop(self):
        for name, proc in self.procs.items():
            if proc.poll() is None:  # SIGINT: an agent stops its tasks (SIGTERM leaves them for the next agent)
                proc.send_signal(signal.SIGTERM if name in self.heads else signal.SIGINT)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.engine.dispose()


@pytest.fixture
def cluster(postgres, tmp_path):
    made = Cluster(postgres, tmp_path)
    try:
        yield made
    finally:
        made.stop()
        postgres.drop_database("corral_ha")


def overlapping_gpu_holds(engine):
    """(node, gpu) pairs that two tasks held at once, from the task records."""
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT node, gpus, assigned_at, finished_at FROM tasks ORDER BY assigned_at")
        ).all()
    holds = defaultdict(list)
    for node, gpus, start, end in rows:
        for gpu in gpus:
            holds[(node, gpu)].append((start, end))
    clashes = []
    for slot, spans in holds.items():
        for (_, end), (start, _) in itertools.pairwise(spans):
            if end is None or start < end:
                clashes.append(slot)
    return clashes


def submit(client, i):
    return client.submit({"command": "sleep 0.3", "resources": {"gpus": 1}}, f"key-{i}")["id"]


def test_sigkill_of_the_leader_under_load_hands_over_within_10_s(cluster):
    cluster.start_head("a")
    wait_for(lambda: cluster.healthy("a") and cluster.leader() == "a", 30, "head a to lead")
    cluster.start_head("b")
    wait_for(lambda: cluster.healthy("b"), 30, "head b to serve")
    both = ",".join(cluster.heads.values())
    with Client(cluster.heads["a"], cluster.admin_token("a")) as first:
        join = first.join_token()
    for node in ("n1", "n2"):
        cluster.spawn(node, "agent", "--head", both, "--token", join, "--name", node, "--fake-gpus", "2xH100")
    with Client(both, cluster.admin_token("a")) as client:
        run_through_a_leader_kill(cluster, client)


def run_through_a_leader_kill(cluster, client):
    wait_for(lambda: len(client.nodes()) == 2, 30, "both agents to register")

    ids = [submit(client, i) for i in range(JOBS // 2)]
    wait_for(lambda: any(j["state"] != "PENDING" for j in client.jobs()), 30, "the first jobs to start")
    first_token = cluster.lease()[1]

    cluster.procs["a"].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    ids += [submit(client, i) for i in range(JOBS // 2, JOBS)]
    wait_for(lambda: cluster.leader() == "b", 10, "head b to take the lease")
    took_over_s = time.monotonic() - killed
    print(f"leader handover after SIGKILL: {took_over_s:.1f} s")
    assert cluster.lease()[1] > first_token  # a new fencing token

    def all_done():
        jobs = {j["id"]: j for j in client.jobs(include_all=True)}
        return all(jobs[i]["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") for i in ids) and jobs

    jobs = wait_for(all_done, 90, "every job to finish")
    assert len(set(ids)) == JOBS
    assert sorted(jobs) == sorted(ids)  # no job lost, none doubled
    assert {jobs[i]["state"] for i in ids} == {"SUCCEEDED"}, {i: jobs[i]["reason"] for i in ids}
    assert overlapping_gpu_holds(cluster.engine) == []
    assert took_over_s < 10
