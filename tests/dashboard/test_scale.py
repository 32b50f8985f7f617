"""The dashboard stays responsive with 1,000 nodes (8,000 GPUs) registered through the agent API.

Bounds, on a shared 2-core machine: the overview (status and every node with its GPUs, about
1.5 MB of JSON, 9,000 elements) loads and draws within LOAD_BOUND_S of navigation, and each
refresh (fetch and redraw) within REFRESH_BOUND_S. Both are several times what we measure, to
absorb a busy machine, yet far below what a person notices as a hung page (10 s).
"""

from __future__ import annotations

import time

import pytest

NODES = 1000
LOAD_BOUND_S = 6.0
REFRESH_BOUND_S = 3.0


@pytest.mark.timeout(240)
def test_a_thousand_nodes_load_and_refresh_in_bounded_time(served, page, screenshot):
    for n in range(NODES):
        served.register(f"gpu-{n:04d}")
    for n in range(NODES // 10):  # a job on one node in ten, with readings
        served.submit({"command": "train", "resources": {"gpus": 8}, "team": f"team-{n % 7}"})
    served.cycle()
    jobs = served.http.get("/v1/jobs", headers=served.headers()).json()
    for node in {a["node"] for job in jobs for a in job["allocation"]}:
        served.beat(served.nodes[node])

    started = time.monotonic()
    page.goto(served.link(refresh_s=1))
    page.wait_for_function("document.querySelectorAll('#grid .node').length === 1000")
    loaded = time.monotonic() - started
    assert page.locator("#grid .gpu").count() == NODES * 8
    assert page.locator("#grid .gpu.job.u4").count() == NODES // 10 * 8

    refreshes = []
    for count in (2, 3, 4):
        page.wait_for_function(f"Number(document.getElementById('updated').dataset.count) >= {count}")
        refreshes.append(int(page.locator("#updated").get_attribute("data-ms") or "0") / 1000)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"1000 nodes: load {loaded:.2f}s, refreshes {[round(r, 2) for r in refreshes]}s (loadavg {load})")
    screenshot(page, "overview-1000-nodes")
    assert loaded < LOAD_BOUND_S
    assert max(refreshes) < REFRESH_BOUND_S
    page.click("header >> text=Queue")  # still usable: the next page answers
    page.wait_for_selector("#queue tbody tr")
    assert page.locator("#queue tbody tr").count() == NODES // 10
