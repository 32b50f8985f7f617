"""Placement on a real cluster: GPUs are never shared, gangs start whole, CPU-only jobs get no GPU."""

from __future__ import annotations

import sys
import textwrap
from collections import defaultdict
from itertools import pairwise

import pytest

pytestmark = pytest.mark.e2e

RECORDER = textwrap.dedent(
    """
    import os, sys, time
    start = time.monotonic_ns()
    time.sleep(float(sys.argv[2]))
    end = time.monotonic_ns()
    fields = [os.environ["CORRAL_JOB_ID"], os.environ["CORRAL_NODE"], os.environ["CUDA_VISIBLE_DEVICES"], start, end]
    with open(os.path.join(sys.argv[1], os.environ["CORRAL_JOB_ID"]), "w") as out:
        out.write(" ".join(str(f) for f in fields) + "\\n")
    """
)


@pytest.mark.timeout(150)
def test_24_one_gpu_jobs_on_8_gpus_never_share_a_gpu(cluster):
    records_dir = cluster.workspace / "intervals"
    records_dir.mkdir()
    script = cluster.workspace / "record.py"
    script.write_text(RECORDER)
    command = f"{sys.executable} {script} {records_dir} 0.8"
    with cluster.client() as client:
        ids = [
            client.submit({"name": f"burst-{i}", "command": command, "resources": {"gpus": 1}})["id"] for i in range(24)
        ]
        cluster.submitted += ids
        cluster.wait_ok(*ids, timeout=100)
        jobs = {j["id"]: j for j in client.jobs(include_all=True) if j["id"] in ids}

    assert set(jobs) == set(ids)
    assert all(j["state"] == "SUCCEEDED" and j["exit_code"] == 0 for j in jobs.values())
    intervals = []
    for job_id in ids:
        recorded_id, node, devices, start, end = (records_dir / job_id).read_text().split()
        assert recorded_id == job_id
        assert node in ("local-1", "local-2")
        assert devices in ("0", "1", "2", "3"), f"{job_id} saw CUDA_VISIBLE_DEVICES={devices!r}"
        assert [(a["node"], a["gpus"]) for a in jobs[job_id]["allocation"]] == [(node, [int(devices)])]
        intervals.append((int(start), int(end), node, int(devices), job_id))

    by_gpu: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
    for start, end, node, gpu, job_id in intervals:
        by_gpu[(node, gpu)].append((start, end, job_id))
    for key, spans in by_gpu.items():
        spans.sort()
        for (_, end_a, job_a), (start_b, _, job_b) in pairwise(spans):
            assert end_a <= start_b, f"{job_a} and {job_b} ran at the same time on {key}"

    events = sorted([(start, 1) for start, *_ in intervals] + [(end, -1) for _, end, *_ in intervals])
    running = peak = 0
    for _, delta in events:  # at equal times an end (-1) sorts before a start (+1)
        running += delta
        peak = max(peak, running)
    assert peak <= 8, f"{peak} jobs ran at once on 8 GPUs"
    assert peak >= 2, "jobs never ran side by side: the check above proved nothing"
    assert len(by_gpu) >= 2


@pytest.mark.timeout(60)
def test_cpu_only_job_gets_no_gpu_and_runs_in_the_submitters_directory(cluster):
    here = cluster.workspace / "submitted from here"
    here.mkdir()
    job_id = cluster.run("--gpus", "0", command='echo "cvd=[${CUDA_VISIBLE_DEVICES-unset}]"; pwd', cwd=here)
    cluster.wait_ok(job_id)
    job = cluster.show(job_id)
    assert job["gpus_per_node"] == 0
    assert [a["gpus"] for a in job["allocation"]] == [[]]
    assert cluster.ok("logs", job_id).splitlines() == ["cvd=[]", str(here)]


@pytest.mark.timeout(90)
def test_gang_that_cannot_fit_waits_whole_then_starts(cluster):
    blocker = cluster.run("--gpus", "4", command="sleep 120")
    cluster.wait_for(lambda: cluster.api_job(blocker)["state"] == "RUNNING", 30, "the blocker to run")
    busy_node = cluster.show(blocker)["allocation"][0]["node"]

    gang = cluster.run("--nodes", "2", "--gpus", "4", command='echo "$RANK $CORRAL_NODE $CUDA_VISIBLE_DEVICES"')
    job = cluster.wait_for(
        lambda: (j := cluster.api_job(gang))["reason"] != "waiting for the scheduler" and j,
        20,
        "the scheduler to give the gang a reason",
    )
    assert job["state"] == "PENDING"
    assert "node" in job["reason"], job["reason"]
    assert job["started_at"] is None
    with cluster.client() as client:
        held = {n["name"]: [g["allocated_to"] for g in n["gpus"]] for n in client.nodes()}
    assert held[busy_node] == [blocker] * 4
    free_node = next(n for n in held if n != busy_node)
    assert held[free_node] == [None] * 4, "a pending gang must not hold part of its GPUs"
    assert cluster.show(gang)["state"] == "PENDING"

    cluster.ok("cancel", blocker)
    cluster.wait_ok(gang, timeout=60)
    job = cluster.show(gang)
    assert sorted(a["node"] for a in job["allocation"]) == ["local-1", "local-2"]
    assert all(a["gpus"] == [0, 1, 2, 3] for a in job["allocation"])
    assert cluster.show(blocker)["state"] == "CANCELLED"
