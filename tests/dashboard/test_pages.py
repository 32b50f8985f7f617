"""The dashboard's pages in headless Chromium, against a real head over HTTP."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cluster_config():
    return "teams:\n  research: {quotas: {H100: {nominal: 8, borrowing_limit: 4}}}\n  vision: {}\n"


def busy_cluster(served):
    """Three nodes: a busy job and an idle one on n1, n2 unhealthy GPU 3, n3 drained; one job waiting."""
    n1, n2, _ = served.register("n1"), served.register("n2"), served.register("n3", gpus=4, gpu_type="A100")
    served.http.post("/v1/nodes/n3/drain", json={"reason": "maintenance"}, headers=served.headers())
    alice = served.user_token("alice")
    busy = served.submit({"name": "train-llm", "command": "train", "resources": {"gpus": 4}, "team": "research"}, alice)
    idle = served.submit({"name": "notebook", "command": "sleep", "resources": {"gpus": 2}, "team": "vision"})
    served.cycle()
    served.beat(n1)
    served.beat(n2, ecc={3})
    for _ in range(12):
        served.clock.advance(10)
        served.beat(n1, utilization={0: 90.0, 1: 95.0, 2: 80.0, 3: 99.0, 4: 1.0, 5: 2.0})
        served.beat(n2, ecc={3})
    waiting = served.submit({"name": "big", "command": "x", "resources": {"gpus": 8}, "team": "research"})
    served.cycle()
    return {"busy": busy, "idle": idle, "waiting": waiting, "n1": n1, "alice": alice}


def test_sign_in_form_then_the_cluster_grid(served, page, screenshot):
    busy_cluster(served)
    page.goto(served.url + "/")
    page.wait_for_selector("#login")
    page.fill("#token", "cu_wrong")
    page.click("#login button")
    page.wait_for_selector("text=That token was not accepted.")
    page.fill("#token", served.admin)
    page.click("#login button")
    page.wait_for_selector("#grid .node")
    assert page.locator("#grid .node").count() == 3
    assert page.locator("#nodes-card b").inner_text() == "2 / 3"  # n3 is drained
    n1 = page.locator(".node", has=page.locator(".name", has_text="n1"))
    assert n1.locator(".gpu.job.u4").count() == 4  # the busy job's GPUs, 80–99 %
    assert n1.locator(".gpu.job.u0").count() == 2  # the idle job's
    assert n1.locator(".gpu:not(.job)").count() == 2  # free
    assert page.locator(".node.DRAINED .name").inner_text() == "n3"
    assert page.locator("#grid .gpu.bad").count() == 1
    screenshot(page, "overview")


def test_a_gpu_opens_its_jobs_page_with_utilization_and_live_logs(served, page, screenshot):
    jobs = busy_cluster(served)
    served.ship_log(jobs["n1"], jobs["busy"], "epoch 1 loss 2.31\n")
    page.goto(served.link())
    page.wait_for_selector("#grid .node")
    page.locator(f'[data-job="{jobs["busy"]}"]').first.click()
    page.wait_for_selector("#job-gpus tbody tr")
    assert page.locator("h1").inner_text().startswith(f"Job {jobs['busy']}")
    assert page.locator("#job-gpus tbody tr").count() == 4
    assert page.locator("#job-gpus svg polyline").count() == 4
    page.wait_for_selector("#logs:has-text('epoch 1 loss 2.31')")
    served.ship_log(jobs["n1"], jobs["busy"], "epoch 2 loss 1.87\n", offset=len("epoch 1 loss 2.31\n"))
    page.wait_for_selector("#logs:has-text('epoch 2 loss 1.87')")  # the page follows the log
    assert page.locator("#logs").inner_text().count("epoch 1") == 1
    # 4 GPUs x 120 s so far at 2.5 per GPU-hour
    assert re.search(r"0\.13 GPU-hours · cost 0\.33", page.locator("#usage").inner_text())
    screenshot(page, "job")

    page.evaluate("location.hash = '#/jobs/j-nosuchjob'")  # from one job's page to a job that is not there
    page.wait_for_selector("h1:has-text('j-nosuchjob')")
    assert "404" in page.locator("#view").inner_text() and jobs["busy"] not in page.locator("#view").inner_text()
    page.evaluate("location.hash = '#/queue'")
    page.wait_for_selector("h1:has-text('Queue')")
    assert page.locator("#problem").inner_text() == ""  # the last page's problem is gone with it


def test_the_queue_shows_why_jobs_wait_and_flags_idle_ones(served, page, screenshot):
    from corral.head.services.idle import check_idle

    jobs = busy_cluster(served)
    for _ in range(60):  # the notebook's GPUs stay under 5 % for 10 minutes
        served.clock.advance(10)
        served.beat(jobs["n1"], utilization={0: 90.0, 1: 95.0, 2: 80.0, 3: 99.0, 4: 1.0, 5: 2.0})
    assert [d.action for d in check_idle(served.rt)] == ["flag"]
    page.goto(served.link())
    page.wait_for_selector("#grid")
    page.click("header >> text=Queue")
    page.wait_for_selector("#queue tbody tr")
    rows = page.locator("#queue tbody tr")
    assert rows.count() == 3
    waiting = page.locator("#queue tr", has=page.locator(f"text={jobs['waiting']}"))
    assert "PENDING" in waiting.inner_text()
    assert waiting.locator(".reason").inner_text().strip() != ""
    idle = page.locator("#queue tr", has=page.locator(f"text={jobs['idle']}"))
    assert "2 GPU(s) under 5% utilization" in idle.inner_text()
    screenshot(page, "queue")


def test_teams_show_gpus_in_use_and_usage_charts_show_cost(served, page, screenshot):
    jobs = busy_cluster(served)
    page.goto(served.link())
    page.wait_for_selector("#grid")
    page.click("header >> text=Teams")
    page.wait_for_selector("#teams tbody tr")
    teams = {
        row.locator("td").nth(0).inner_text(): row.locator("td").nth(1).inner_text()
        for row in page.locator("#teams tbody tr").all()
    }
    assert teams == {"research": "4", "vision": "2"}
    research = page.locator("#teams tr", has=page.locator("text=research"))
    assert research.locator("td").nth(3).inner_text() == "8"  # waiting
    assert research.locator("td").nth(4).inner_text() == "H100: 8 (+4 borrowable)"
    assert research.locator(".bar").get_attribute("title") == "4 of 8 GPUs of its quota"
    vision = page.locator("#teams tr", has=page.locator("text=vision"))
    assert vision.locator("td").nth(4).inner_text() == "no quota set"
    screenshot(page, "teams")

    page.click("header >> text=Usage")
    page.wait_for_selector("#chart-hours svg rect")
    assert page.locator("#chart-cost svg rect").count() >= 2
    totals = {
        row.locator("td").nth(0).inner_text(): row.locator("td").nth(3).inner_text()
        for row in page.locator("#usage-totals tbody tr").all()
    }
    assert totals == {"research": "0.33", "vision": "0.17"}  # 4 and 2 H100s for 120 s at 2.5
    page.click("button[data-range='24h']")
    page.wait_for_selector("button[data-range='24h'][disabled]")
    page.wait_for_selector("#chart-hours svg rect")
    screenshot(page, "usage")
    del jobs


def test_a_user_sees_only_their_own_jobs(served, page):
    jobs = busy_cluster(served)
    page.goto(served.link(jobs["alice"]))
    page.wait_for_selector("#grid")
    page.click("header >> text=Queue")
    page.wait_for_selector("#queue tbody tr")
    assert page.locator("#queue tbody tr").count() == 1
    assert jobs["busy"] in page.locator("#queue").inner_text()


def test_a_malformed_escape_in_the_address_is_read_as_written(served, page):
    jobs = busy_cluster(served)
    page.goto(served.link(jobs["alice"] + "%"))  # a token link mangled in a copy: the page asks for a token
    page.wait_for_selector("text=That token was not accepted.")
    assert "token=" not in page.url  # it left the address bar all the same
    page.goto(served.link())
    page.wait_for_selector("#grid .node")
    page.evaluate("location.hash = '#/jobs/j-%E0%A4%A'")  # a job page, not the last page left standing
    page.wait_for_selector("h1:has-text('j-%E0%A4%A')")
    assert "404" in page.locator("#problem").inner_text()


def test_a_gpu_on_a_lost_node_shows_no_reading(served, page):
    from corral.head.services.liveness import check_nodes

    n1 = served.register("n1", gpus=2)
    served.submit({"name": "train", "command": "train", "resources": {"gpus": 1}})
    served.cycle()
    served.beat(n1, utilization={0: 93.0})
    served.clock.advance(60)
    assert check_nodes(served.rt) == ["n1"]
    page.goto(served.link())
    page.wait_for_selector("#grid .node.NOT_READY")
    titles = page.locator("#grid .gpu").evaluate_all("cells => cells.map(c => c.title)")
    assert titles == ["n1 GPU 0 (H100): free, node not ready", "n1 GPU 1 (H100): free, node not ready"]


def test_a_refresh_faster_than_once_a_second_is_not_followed(served, page):
    """``?refresh=0.05`` would have every open page ask the head twenty times a second."""
    served.register("n1")
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/v1/status" in request.url else None)
    page.goto(f"{served.url}/?refresh=0.05#token={served.admin}")
    page.wait_for_selector("#grid .node")
    page.wait_for_timeout(2500)
    assert 1 <= len(asked) <= 5
