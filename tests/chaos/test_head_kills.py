"""The head is SIGKILLed and started again three times while 8 clients submit 2,000 jobs.

Clients send each submission with an Idempotency-Key and send it again until the head answers, as
`corral submit` does. Afterwards: every key made exactly one job, every job ended, and the audit
trail of GPU holds never gave one GPU to two tasks."""

from __future__ import annotations

import threading
import time

import pytest

from corral.testing.audit import all_events, double_holds, still_held
from corral.testing.procs import wait_for

pytestmark = pytest.mark.e2e

CLIENTS = 8
JOBS = 2_000
KILL_AFTER = (300, 900, 1_500)  # accepted submissions before each SIGKILL


@pytest.mark.timeout(420)
def test_no_submission_is_lost_or_doubled_and_no_gpu_is_held_twice_across_head_kills(make_cluster):
    cluster = make_cluster(["--grace", "1", "--heartbeat-interval", "0.5"])
    for node in ("n1", "n2"):
        cluster.start_agent(node, "8xH100:80GB")
    cluster.wait_ready("n1", "n2")

    accepted: dict[str, str] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def submitter(index: int) -> None:
        try:
            with cluster.client(timeout_s=10) as client:
                for i in range(index, JOBS, CLIENTS):
                    key = f"chaos-{i}"
                    spec = {"command": "true", "resources": {"gpus": 1}, "max_restarts": 5, "name": key}
                    job = client.submit(spec, idempotency_key=key)
                    with lock:
                        accepted[key] = job["id"]
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=submitter, args=(i,), daemon=True) for i in range(CLIENTS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    kills = []
    for threshold in KILL_AFTER:
        wait_for(lambda t=threshold: len(accepted) >= t or errors, 120, f"{threshold} accepted submissions")
        assert not errors, errors
        cluster.kill("head")
        kills.append(len(accepted))
        time.sleep(0.3)
        cluster.start_head()
    for thread in threads:
        thread.join(180)
    assert not errors, errors
    submitted_s = time.monotonic() - started
    assert len(accepted) == JOBS

    with cluster.client() as client:

        def everything_ended():
            jobs = client.jobs(include_all=True)
            return jobs if len(jobs) >= JOBS and all(j["state"] in cluster.TERMINAL for j in jobs) else None

        # Asked cheaply until none is left (listing all 2,000 jobs takes the head a good part of a second,
        # which it would otherwise spend running them), then in full.
        wait_for(lambda: client.jobs(states=["PENDING", "RUNNING"], limit=1) == [], 240, "no job to be live", 0.5)
        jobs = wait_for(everything_ended, 240, "every job to end", interval_s=1.0)
        events = all_events(client)
    print(f"{JOBS} submissions through {len(kills)} head kills (at {kills}) in {submitted_s:.1f} s")

    assert len(jobs) == JOBS, f"{len(jobs)} jobs for {JOBS} distinct submissions"
    assert {j["id"] for j in jobs} == set(accepted.values())
    assert {j["name"] for j in jobs} == set(accepted)
    unfinished = [j for j in jobs if j["state"] != "SUCCEEDED"]
    assert not unfinished, [(j["id"], j["state"], j["reason"]) for j in unfinished[:5]]
    assert double_holds(events) == []
    assert still_held(events) == []
