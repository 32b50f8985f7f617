"""/metrics in the Prometheus text format, parsed with prometheus-client's own parser."""

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families


def scrape(head) -> dict[str, list]:
    response = head.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {family.name: family.samples for family in text_string_to_metric_families(response.text)}


def value(samples, name=None, **labels) -> float:
    matching = [
        s for s in samples if (name is None or s.name == name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matching) == 1, (labels, samples)
    return matching[0].value


def sample(index, utilization, memory=1000, power=300.0):
    return {
        "index": index,
        "utilization": utilization,
        "memory_used_mb": memory,
        "temperature_c": 55.0,
        "power_w": power,
        "ecc_uncorrectable": 0,
        "xid_errors": 0,
    }


def test_jobs_gpus_nodes_and_per_gpu_gauges(head):
    agent = head.register("n1", gpus=2)
    job = head.submit({"command": "train", "resources": {"gpus": 1}, "team": "vision"})
    head.submit({"command": "later", "resources": {"gpus": 2}})
    head.cycle()
    [task] = agent.tasks()
    head.clock.advance(3)
    agent.beat([head.running(task)])
    response = head.client.post(
        "/v1/agents/n1/heartbeat",
        json={
            "tasks": [head.running(task)],
            "applied_version": agent.applied,
            "samples": [sample(0, 93.5, 40000, 650.0), sample(1, 0.0, 0, 70.0)],
        },
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    assert response.status_code == 200
    head.clock.advance(1.5)
    metrics = scrape(head)

    assert value(metrics["corral_jobs"], state="RUNNING") == 1
    assert value(metrics["corral_jobs"], state="PENDING") == 1
    assert value(metrics["corral_gpus"], type="H100", state="allocated") == 1
    assert value(metrics["corral_gpus"], type="H100", state="free") == 1
    assert value(metrics["corral_gpus_allocated_by_team"], type="H100", team="vision") == 1
    assert value(metrics["corral_node_ready"], node="n1") == 1
    assert value(metrics["corral_node_heartbeat_lag_seconds"], node="n1") == 1.5
    assert value(metrics["DCGM_FI_DEV_GPU_UTIL"], node="n1", gpu="0") == 93.5
    assert value(metrics["DCGM_FI_DEV_GPU_UTIL"], node="n1", gpu="0", job=job["id"], team="vision") == 93.5
    assert value(metrics["DCGM_FI_DEV_GPU_UTIL"], node="n1", gpu="1", job="") == 0.0
    assert value(metrics["DCGM_FI_DEV_FB_USED"], node="n1", gpu="0") == 40000
    assert value(metrics["DCGM_FI_DEV_POWER_USAGE"], node="n1", gpu="0") == 650.0
    waits = metrics["corral_job_queue_wait_seconds"]
    assert value(waits, "corral_job_queue_wait_seconds_count") == 1
    assert value(waits, "corral_job_queue_wait_seconds_sum") == 3.0


def test_a_lost_node_shows_as_not_ready_and_its_gpus_unavailable(head):
    head.register("n1", gpus=4, gpu_type="A100")
    head.clock.advance(11)
    head.check_nodes()
    metrics = scrape(head)
    assert value(metrics["corral_node_ready"], node="n1") == 0
    assert value(metrics["corral_gpus"], type="A100", state="unavailable") == 4
    assert value(metrics["corral_gpus"], type="A100", state="free") == 0  # every state of a type, 0 included
    assert value(metrics["corral_gpus"], type="A100", state="allocated") == 0


def test_fragmented_gpus_are_reported_after_a_cycle(head):
    agent = head.register("n1", gpus=8)
    head.submit({"command": "a", "resources": {"gpus": 5}})
    head.cycle()
    agent.run_all()
    head.submit({"command": "b", "resources": {"gpus": 4}})
    head.cycle()
    assert value(scrape(head)["corral_gpus_fragmented"], type="H100") == 3.0  # 3 free, 4 wanted


def test_fragmented_gpus_read_zero_for_every_type_when_nothing_waits(head):
    head.register("n1", gpus=8)
    head.register("n2", gpus=2, gpu_type="L4")
    assert value(scrape(head)["corral_gpus_fragmented"], type="H100") == 0.0  # before any cycle
    head.submit({"command": "a", "resources": {"gpus": 5}})
    head.cycle()
    metrics = scrape(head)
    assert value(metrics["corral_gpus_fragmented"], type="H100") == 0.0
    assert value(metrics["corral_gpus_fragmented"], type="L4") == 0.0


def test_a_shared_gpu_counts_for_each_team_by_its_fraction_and_names_every_job(head):
    agent = head.register("n1", gpus=1)
    first = head.submit({"command": "a", "resources": {"gpus": 0.5}, "team": "ta"})
    second = head.submit({"command": "b", "resources": {"gpus": 0.25}, "team": "tb"})
    head.cycle()
    response = head.client.post(
        "/v1/agents/n1/heartbeat",
        json={
            "tasks": [head.running(task) for task in agent.tasks()],
            "applied_version": agent.applied,
            "samples": [sample(0, 40.0)],
        },
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    assert response.status_code == 200
    metrics = scrape(head)
    assert value(metrics["corral_gpus"], type="H100", state="allocated") == 1
    assert value(metrics["corral_gpus_allocated_by_team"], type="H100", team="ta") == 0.5
    assert value(metrics["corral_gpus_allocated_by_team"], type="H100", team="tb") == 0.25
    jobs = ",".join(sorted((first["id"], second["id"])))
    assert value(metrics["DCGM_FI_DEV_GPU_UTIL"], node="n1", gpu="0", job=jobs, team="ta,tb") == 40.0


def test_a_lost_nodes_gpus_have_no_per_gpu_series(head):
    agent = head.register("n1", gpus=1)
    response = head.client.post(
        "/v1/agents/n1/heartbeat",
        json={"tasks": [], "applied_version": agent.applied, "samples": [sample(0, 89.8)]},
        headers={"Authorization": f"Bearer {agent.token}"},
    )
    assert response.status_code == 200
    assert value(scrape(head)["DCGM_FI_DEV_GPU_UTIL"], node="n1", gpu="0") == 89.8
    head.clock.advance(head.rt.settings.node_timeout_s + 1)
    assert head.check_nodes() == ["n1"]
    metrics = scrape(head)
    assert value(metrics["corral_node_ready"], node="n1") == 0
    assert [s for s in metrics.get("DCGM_FI_DEV_GPU_UTIL", []) if s.labels["node"] == "n1"] == []


def test_head_answers_with_the_headers_of_get_and_no_body(head):
    """Prometheus and load balancers probe with HEAD: 200, GET's headers, an empty body."""
    head.register("n1", gpus=2)
    got = head.client.get("/metrics")
    probed = head.client.head("/metrics")
    assert probed.status_code == 200
    assert probed.content == b""
    assert probed.headers["content-type"] == got.headers["content-type"] == CONTENT_TYPE_LATEST
    assert probed.headers["content-length"] == got.headers["content-length"] == str(len(got.content))
