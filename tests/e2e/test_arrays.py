"""Job arrays and dependencies through the CLI on a real cluster."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(120)
def test_an_array_runs_every_index_and_dependencies_follow_their_jobs(cluster):
    job_file = cluster.workspace / "array.yaml"
    job_file.write_text("name: shard\ncommand: echo shard $CORRAL_ARRAY_INDEX of $CORRAL_ARRAY_JOB_ID\n")
    out = cluster.json("submit", str(job_file), "--array", "0-3%2")
    ids = out["ids"]
    assert out["id"] == ids[0] and len(ids) == 4
    cluster.submitted.extend(ids)
    cluster.wait_ok(*ids, timeout=60)
    for index, job_id in enumerate(ids):
        assert cluster.ok("logs", job_id).strip() == f"shard {index} of {ids[0]}"
        assert cluster.show(job_id)["array_index"] == index

    failing = cluster.run(command="exit 4")
    after_ok = cluster.json("submit", str(job_file), "--after-ok", failing)["id"]
    after_any = cluster.json("submit", str(job_file), "--after-any", failing)["id"]
    cluster.submitted.extend([after_ok, after_any])
    cluster.wait_ok(after_any, timeout=60)
    assert cluster.wait(after_ok, timeout=60).returncode == 1
    job = cluster.show(after_ok)
    assert job["state"] == "CANCELLED"
    assert job["reason"] == f"dependency {failing} ended FAILED; after_ok needs every dependency to succeed"


def test_bad_arrays_and_unknown_dependencies_exit_2_naming_the_field(cluster):
    job_file = cluster.workspace / "array.yaml"
    job_file.write_text("command: 'true'\n")
    bad = cluster.cli("submit", str(job_file), "--array", "5-1")
    assert bad.returncode == 2 and "array" in bad.stderr and "ends before it starts" in bad.stderr
    unknown = cluster.cli("submit", str(job_file), "--after-ok", "j-nosuchjb")
    assert unknown.returncode == 2
    assert "after_ok[0]" in unknown.stderr and "j-nosuchjb" in unknown.stderr


def test_an_array_sent_again_with_its_idempotency_key_is_made_once(cluster):
    """`corral submit --array` and `corral run --array` send the array with a key, and send it again
    while the head does not answer: a repeat answers the first request's ids and makes no job."""
    from corral.client.errors import ConflictError, InvalidRequest

    spec = {"command": "true", "array": "0-2", "workdir": str(cluster.workspace)}
    with cluster.client() as client:
        first = client.submit_batch([spec], idempotency_key="array-key-1")
        cluster.submitted.extend(first)
        assert len(first) == 3
        assert client.submit_batch([spec], idempotency_key="array-key-1") == first
        elements = [j["id"] for j in client.jobs(include_all=True) if j["array_id"] == first[0]]
        assert sorted(elements) == sorted(first)
        with pytest.raises(ConflictError, match="array-key-1"):
            client.submit_batch([{**spec, "array": "0-3"}], idempotency_key="array-key-1")
        with pytest.raises(InvalidRequest, match="holds one job"):
            client.submit_batch([spec, spec], idempotency_key="array-key-2")
