"""The head's cache of pending jobs as scheduler values: equal requests are one object."""

from __future__ import annotations

from corral.model import Request, interned


def test_equal_requests_are_interned_as_one_object():
    first = interned(Request(nodes=2, gpus_per_node=8.0, gpu_types=("H100",)))
    again = interned(Request(nodes=2, gpus_per_node=8.0, gpu_types=("H100",)))
    other = interned(Request(nodes=2, gpus_per_node=8.0, gpu_types=("A100",)))
    assert first is again and first == Request(nodes=2, gpus_per_node=8.0, gpu_types=("H100",))
    assert other is not first and other.gpu_types == ("A100",)


def test_jobs_asking_for_the_same_resources_share_one_request(head):
    spec = {"command": "true", "resources": {"gpus": 2, "gpu_type": ["H100", "A100"]}}
    ids = [head.submit(spec)["id"], head.submit(spec)["id"], head.submit({**spec, "resources": {"gpus": 1}})["id"]]
    with head.rt.read() as session:
        jobs = head.rt.job_cache.jobs(session, ids)
    assert [j.id for j in jobs] == ids
    assert jobs[0].request is jobs[1].request
    assert jobs[0].request.gpu_types == ("H100", "A100") and jobs[0].request.gpus_per_node == 2
    assert jobs[2].request is not jobs[0].request and jobs[2].request.gpus_per_node == 1
