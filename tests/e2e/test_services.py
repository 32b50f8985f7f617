"""Services on a real cluster: replicas of examples/model_server.py behind the head's gateway,
under a bounded load loop (a few seconds, a few client threads)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.e2e

MODEL_SERVER = Path(__file__).resolve().parents[2] / "examples" / "model_server.py"
BODY = json.dumps({"x": [0.5] * 16}).encode()


def service_file(cluster, name: str, **fields) -> Path:
    spec = {
        "kind": "service",
        "name": name,
        "command": [sys.executable, str(MODEL_SERVER)],
        "readiness": {"path": "/ready", "timeout": "1s", "hold": "30s"},
        **fields,
    }
    path = cluster.workspace / f"{name}.yaml"
    path.write_text(json.dumps(spec))  # JSON is YAML
    return path


def service(cluster, name: str) -> dict:
    return json.loads(cluster.ok("service", "show", name, "-o", "json"))


def ready_replicas(cluster, name: str, count: int, timeout_s: float = 30.0, revision: int | None = None) -> dict:
    def enough():
        svc = cluster.api_service(name)
        serving = [r for r in svc["replicas"] if r["ready"] and not r["draining"]]
        if revision is not None:
            serving = [r for r in serving if r["revision"] == revision]
        return svc if len(serving) >= count else None

    return cluster.wait_for(enough, timeout_s, f"{count} ready replica(s) of {name}", interval_s=0.2)


@contextlib.contextmanager
def deployed(cluster, name: str, **fields) -> Iterator[None]:
    assert cluster.ok("serve", str(service_file(cluster, name, **fields))).strip() == name
    try:
        yield
    finally:
        cluster.cli("service", "delete", name)


def request(url: str, method: str = "POST", path: str = "/predict", timeout: float = 40.0):
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, parts.path.rstrip("/") + path, body=BODY if method == "POST" else None)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


class Load:
    """Client threads posting predictions through the gateway in a loop, over keep-alive connections."""

    def __init__(self, url: str, threads: int) -> None:
        self.url = urlsplit(url)
        self.outcomes: Counter[str] = Counter()
        self.replicas: Counter[str] = Counter()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)

    def _run(self) -> None:
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)
        while not self.stopping.is_set():
            try:
                conn.request("POST", self.url.path.rstrip("/") + "/predict", body=BODY)
                response = conn.getresponse()
                response.read()
                outcome = str(response.status)
                replica = response.getheader("X-Corral-Replica", "")
            except (OSError, http.client.HTTPException) as exc:
                outcome, replica = type(exc).__name__, ""
                conn.close()
                conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=30)
            with self.lock:
                self.outcomes[outcome] += 1
                self.replicas[replica] += 1
        conn.close()

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    @property
    def failed(self) -> int:
        return self.total - self.outcomes["200"]


def replica_pid(cluster, job_id: str) -> int:
    found = cluster.processes_mentioning(f"CORRAL_JOB_ID={job_id}\0")
    pids = [pid for pid, cmd in found.items() if cmd.startswith(sys.executable) and "model_server.py" in cmd]
    assert len(pids) == 1, found
    return pids[0]


def test_serve_then_requests_through_the_gateway_name_their_replica(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "hello", replicas={"min": 1, "max": 1}):
        svc = ready_replicas(cluster, "hello", 1)
        (replica,) = svc["replicas"]
        status, headers, body = request(svc["url"])
        assert status == 200, body
        assert headers["x-corral-replica"] == replica["job_id"] == json.loads(body)["replica"]
        listed = {s["name"]: s for s in cluster.json("services")}
        assert listed["hello"]["replicas_ready"] == 1 and listed["hello"]["replicas_desired"] == 1
        job = cluster.show(replica["job_id"])  # a replica is a job like any other
        assert job["state"] == "RUNNING" and job["env"]["CORRAL_SERVICE"] == "hello"
        status, _, body = request(cluster.url + "/s/nothing-here/", method="GET")
        assert status == 404 and b"nothing-here" in body
    assert "hello" not in {s["name"] for s in cluster.json("services")}
    cluster.wait_for(lambda: cluster.api_job(replica["job_id"])["state"] == "CANCELLED", 10, "the replica to stop")


def test_a_bad_service_file_exits_2_and_names_the_field(quick_cluster):
    path = service_file(quick_cluster, "bad", replicas={"min": 3, "max": 1})
    result = quick_cluster.cli("serve", str(path))
    assert result.returncode == 2
    assert "replicas" in result.stderr and "at least min" in result.stderr


def test_streamed_responses_arrive_incrementally(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "streamer", env={"STREAM_GAP_S": "0.3"}):
        svc = ready_replicas(cluster, "streamer", 1)
        parts = urlsplit(svc["url"])
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        conn.request("GET", parts.path + "stream?tokens=5")
        response = conn.getresponse()
        assert response.status == 200, response.read()
        assert response.getheader("X-Corral-Replica")
        arrivals, buffer = [], b""
        while chunk := response.read1(65536):
            buffer += chunk
            while b"\n\n" in buffer:
                _event, buffer = buffer.split(b"\n\n", 1)
                arrivals.append(time.monotonic())
        conn.close()
        assert len(arrivals) == 5
        assert arrivals[-1] - arrivals[0] > 0.9  # four gaps of 0.3 s: the events were not held back


def test_load_scales_out_to_three_replicas_and_back_to_min(quick_cluster):
    cluster = quick_cluster
    autoscale = {"target_inflight": 2, "up_delay": "1s", "down_delay": "2s"}
    with deployed(cluster, "busy", replicas={"min": 1, "max": 3}, autoscale=autoscale, env={"WORK_S": "0.1"}):
        svc = ready_replicas(cluster, "busy", 1)
        started = time.monotonic()
        with Load(svc["url"], threads=8) as load:
            ready_replicas(cluster, "busy", 3, timeout_s=20)
            scaled_after = time.monotonic() - started
            time.sleep(1.0)
        assert scaled_after < 10, scaled_after  # within 10 s of sustained overload
        assert load.failed == 0, load.outcomes
        assert len([r for r in load.replicas if r]) == 3  # the load spread over every replica
        cluster.wait_for(
            lambda: len((svc := cluster.api_service("busy"))["replicas"]) == 1 and svc["replicas_desired"] == 1,
            20,
            "the service to scale back to its minimum",
            interval_s=0.3,
        )


def test_a_replica_killed_under_load_loses_under_one_percent(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "sturdy", replicas={"min": 2, "max": 2}):
        svc = ready_replicas(cluster, "sturdy", 2)
        victim = svc["replicas"][0]["job_id"]
        with Load(svc["url"], threads=4) as load:
            time.sleep(1.0)
            os.kill(replica_pid(cluster, victim), signal.SIGKILL)
            time.sleep(2.5)
        assert load.total > 200, load.outcomes
        assert load.failed / load.total < 0.01, load.outcomes


def test_a_rolling_update_loses_no_request(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "rolling", replicas={"min": 2, "max": 2}):
        svc = ready_replicas(cluster, "rolling", 2)
        old = {r["job_id"] for r in svc["replicas"]}
        with Load(svc["url"], threads=4) as load:
            time.sleep(0.5)
            path = service_file(cluster, "rolling", replicas={"min": 2, "max": 2}, env={"VERSION": "2"})
            assert cluster.ok("serve", str(path)).strip() == "rolling"

            def replaced():
                now = cluster.api_service("rolling")
                current = {r["job_id"] for r in now["replicas"] if r["ready"] and r["revision"] == 2}
                return len(current) == 2 and not old & {r["job_id"] for r in now["replicas"]}

            cluster.wait_for(replaced, 40, "both replicas to be replaced", interval_s=0.3)
            time.sleep(0.5)
        assert load.total > 100, load.outcomes
        assert load.failed == 0, load.outcomes
        served = {r for r in load.replicas if r}
        assert served & old and served - old  # both revisions answered along the way


def test_scale_to_zero_holds_the_first_request_through_a_cold_start(quick_cluster):
    cluster = quick_cluster
    fields = {"replicas": {"min": 0, "max": 1}, "autoscale": {"down_delay": "1s"}, "env": {"STARTUP_S": "1"}}
    with deployed(cluster, "sleepy", **fields):
        svc = service(cluster, "sleepy")
        assert svc["replicas_desired"] == 0 and svc["replicas"] == []
        started = time.monotonic()
        status, headers, body = request(svc["url"])
        assert status == 200, body
        assert headers["x-corral-replica"]
        assert time.monotonic() - started > 1.0  # it waited for the replica to start and be ready
        cluster.wait_for(
            lambda: cluster.api_service("sleepy")["replicas"] == [],
            20,
            "the idle service to sleep again",
            interval_s=0.3,
        )


def test_a_service_that_never_gets_ready_answers_503_after_the_hold(quick_cluster):
    cluster = quick_cluster
    readiness = {"path": "/never", "timeout": "1s", "hold": "2s"}
    with deployed(cluster, "stuck", readiness=readiness):
        svc = service(cluster, "stuck")
        started = time.monotonic()
        status, _, body = request(svc["url"])
        waited = time.monotonic() - started
        assert status == 503
        assert "no ready replica" in json.loads(body)["detail"]
        assert 1.5 < waited < 10


def test_a_standalone_gateway_routes_too(quick_cluster):
    cluster = quick_cluster
    port = cluster.free_port()
    with deployed(cluster, "apart"):
        ready_replicas(cluster, "apart", 1)
        gateway = subprocess.Popen(
            [sys.executable, "-m", "corral", "gateway", "--port", str(port)],
            env=cluster.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:

            def answers():
                with contextlib.suppress(OSError):
                    return request(f"http://127.0.0.1:{port}/s/apart/")[0] == 200
                return False

            cluster.wait_for(answers, 20, "the standalone gateway to answer")
        finally:
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(10)


def test_a_drained_replica_finishes_the_request_it_holds(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "patient", replicas={"min": 1, "max": 1}, env={"WORK_S": "6"}):
        svc = ready_replicas(cluster, "patient", 1)
        (replica,) = svc["replicas"]
        answers: list[tuple[int, dict, bytes]] = []
        slow = threading.Thread(target=lambda: answers.append(request(svc["url"])))
        slow.start()
        time.sleep(1.0)
        cluster.ok("service", "scale", "patient", "0")  # the replica leaves the pool mid-request
        slow.join(30)
        ((status, headers, body),) = answers
        assert status == 200, body  # it ran on past the drain minimum until its request was answered
        assert headers["x-corral-replica"] == replica["job_id"]
        cluster.wait_for(lambda: cluster.api_job(replica["job_id"])["state"] == "CANCELLED", 10, "the replica to stop")


def test_a_command_that_exits_at_once_is_replaced_after_growing_waits(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "quitter", command="true", replicas={"min": 1, "max": 1}):
        time.sleep(6.0)
        svc = service(cluster, "quitter")
        runs = [j for j in cluster.json("jobs", "--all") if j["name"] == "quitter-r1"]
        # Waits of 1, 2 and 4 s: three or four replicas in 6 s (without them: one every half second).
        assert 2 <= len(runs) <= 5, [(j["id"], j["state"]) for j in runs]
        assert "exited with code 0" in svc["reason"], svc


def test_the_replicas_date_and_server_headers_come_through_the_head_once(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "dated"):
        svc = ready_replicas(cluster, "dated", 1)
        parts = urlsplit(svc["url"])
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        try:
            conn.request("GET", parts.path + "ready")
            response = conn.getresponse()
            response.read()
            names = [name.lower() for name, _ in response.getheaders()]
        finally:
            conn.close()
        assert names.count("date") == 1 and names.count("server") == 1, response.getheaders()
        assert response.getheader("server") == "uvicorn"  # the replica's (examples/model_server.py)


def test_scale_to_zero_and_delete_apply_to_the_very_next_request(quick_cluster):
    cluster = quick_cluster
    with deployed(cluster, "prompt"):
        svc = ready_replicas(cluster, "prompt", 1)
        assert request(svc["url"])[0] == 200
        cluster.ok("service", "scale", "prompt", "0")
        status, _, body = request(svc["url"])
        assert status == 503 and b"scaled to 0" in body, body
        deleted = json.loads(cluster.ok("service", "delete", "prompt", "-o", "json"))
        assert deleted == {"name": "prompt", "deleted": True}
        status, _, body = request(svc["url"])
        assert status == 404, body
