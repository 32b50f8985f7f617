"""The dashboard stays responsive with 1,000 nodes (8,000 GPUs) registered through the agent API.

The overview loads the status and every node with its GPUs (about 1.5 MB of JSON) and draws some
9,000 elements. On a shared 2-core machine we measured the first view at 0.8 s and a refresh
(fetch and redraw) at 0.6-0.9 s with a load average of 7.5, and 3.2 s and 2.8-3.3 s with a load
average of 10 (other work on the same cores). The bounds (LOAD_BOUND_S for the first view,
REFRESH_BOUND_S for the median refresh) sit above the loaded figures and below the 10 s at which
a person takes a page for hung.
"""

from __future__ import annotations

import time

import pytest

NODES = 1000
LOAD_BOUND_S = 8.0
REFRESH_BOUND_S = 5.0


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
    assert sorted(refreshes)[1] < REFRESH_BOUND_S
    page.click("header >> text=Queue")  # still usable: the next page answers
    page.wait_for_selector("#queue tbody tr")
    assert page.locator("#queue tbody tr").count() == NODES // 10
