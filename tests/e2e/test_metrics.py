"""The head's /metrics reflects a job running on a fake GPU, through the real agent's heartbeats."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.e2e


def _gpu_utilization(url: str, job_id: str) -> float | None:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "DCGM_FI_DEV_GPU_UTIL":
            for sample in family.samples:
                if sample.labels.get("job") == job_id:
                    return float(sample.value)
    return None


@pytest.mark.timeout(60)
def test_a_running_job_shows_up_in_the_gpu_gauges(cluster):
    job_id = cluster.run("--gpus", "1", command="sleep 20")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 20, "the job to run")
    busy = cluster.wait_for(
        lambda: (u := _gpu_utilization(cluster.url, job_id)) is not None and u > 0 and u, 15, "a busy GPU reading"
    )
    assert 0 < busy <= 100
    cluster.ok("cancel", job_id)
