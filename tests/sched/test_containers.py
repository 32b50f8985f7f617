"""Jobs with a container image go only to nodes whose agent has a container runtime."""

from datetime import UTC, datetime

from corral.model import Request
from corral.sched import NEVER_FITS, NO_CONTAINER_RUNTIME, RESOURCES, get_policy, never_fits, schedule, why
from corral.testing import live_alloc, make_job, make_node, snapshot

NOW = datetime(2025, 1, 1, tzinfo=UTC)
BARE = make_node("bare").gpus(8, "H100").cpus(64)
BOXED = make_node("boxed").gpus(2, "H100").cpus(64).runtime("podman")


def placed(snap) -> dict[str, list[str]]:
    plan = schedule(snap, get_policy("default"), NOW)
    return {p.job_id: [a.node for a in p.allocations] for p in plan.placements}


def test_an_image_job_goes_to_a_node_with_a_runtime_even_where_another_fits_better():
    assert placed(snapshot([BARE, BOXED], [make_job("img").gpus(1).container()])) == {"img": ["boxed"]}


def test_a_job_without_an_image_still_runs_anywhere():
    assert placed(snapshot([BARE], [make_job("bare-job").gpus(1)])) == {"bare-job": ["bare"]}


def test_an_image_job_waits_while_the_nodes_with_a_runtime_are_busy():
    snap = snapshot([BARE, BOXED], [make_job("img").gpus(1).container()], live=[live_alloc("other", "boxed", (0, 1))])
    plan = schedule(snap, get_policy("default"), NOW)
    assert plan.placements == ()
    reason = plan.reasons["img"]
    assert reason.code == RESOURCES
    assert "a container runtime" in reason.message


def test_without_any_runtime_an_image_job_can_never_fit():
    assert never_fits(Request(gpus_per_node=1, container=True), [BARE.build()]) == NO_CONTAINER_RUNTIME
    plan = schedule(snapshot([BARE], [make_job("img").gpus(1).container()]), get_policy("default"), NOW)
    assert plan.reasons["img"].code == NEVER_FITS
    assert "no node has a container runtime" in plan.reasons["img"].message
    assert "--runtime" in plan.reasons["img"].message


def test_feasibility_of_an_image_job_counts_only_the_nodes_with_a_runtime():
    problem = never_fits(Request(gpus_per_node=4, container=True), [BARE.build(), BOXED.build()])
    assert problem is not None
    assert "largest node has 2 H100" in problem
    assert never_fits(Request(gpus_per_node=2, container=True), [BARE.build(), BOXED.build()]) is None


def test_why_names_the_nodes_without_a_runtime():
    groups = why(make_job("img").gpus(1).container().build(), snapshot([BARE, BOXED]), get_policy("default"))
    verdicts = {g.filter: (g.message, g.nodes) for g in groups}
    assert verdicts["runtime"] == ("runs in a container image; this node's agent has no container runtime", ("bare",))
    assert verdicts["fits"][1] == ("boxed",)
