"""The CLI's documented exit codes, against a real head (or none)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
def test_nonzero_exit_fails_the_job_and_wait(cluster):
    job_id = cluster.run("--gpus", "1", command="echo about to fail; exit 7")
    waited = cluster.wait(job_id)
    assert waited.returncode == 1, waited.stderr
    assert job_id in waited.stderr and "FAILED" in waited.stderr
    job = cluster.show(job_id)
    assert job["state"] == "FAILED"
    assert job["exit_code"] == 7
    assert "exit code 7" in job["reason"], job["reason"]
    assert job["finished_at"] is not None
    assert cluster.ok("logs", job_id) == "about to fail\n"


@pytest.mark.timeout(60)
def test_unknown_job_is_not_found(cluster):
    for args in (["show", "j-doesnotexist"], ["logs", "j-doesnotexist"], ["wait", "j-doesnotexist", "--timeout", "5"]):
        result = cluster.cli(*args)
        assert result.returncode == 4, (args, result.stderr)
        assert "j-doesnotexist" in result.stderr
        assert result.stdout == ""


@pytest.mark.timeout(60)
def test_unreachable_head_exits_3_and_says_how_to_start_one(cluster, tmp_path):
    closed = f"http://127.0.0.1:{cluster.free_port()}"
    for args in (["jobs"], ["show", "j-x"], ["status", "-o", "json"], ["run", "--", "true"]):
        started = time.monotonic()
        result = cluster.cli(*args, env=cluster.env(CORRAL_HEAD=closed))
        assert result.returncode == 3, (args, result.stderr)
        assert time.monotonic() - started < 10, args  # nothing to wait for: no head listens there
        assert "corral up" in result.stderr, result.stderr
        assert result.stdout == ""
    nothing = tmp_path / "empty-home"  # no head configured at all
    result = cluster.cli("jobs", env={**cluster.env(), "CORRAL_HOME": str(nothing)})
    assert result.returncode == 3, result.stderr
    assert "corral up" in result.stderr


@pytest.mark.timeout(60)
def test_wait_times_out_with_124(cluster):
    job_id = cluster.run("--gpus", "1", command="sleep 120")
    started = time.monotonic()
    result = cluster.cli("wait", job_id, "--timeout", "0.5", timeout=30)
    elapsed = time.monotonic() - started
    assert result.returncode == 124, result.stderr
    assert job_id in result.stderr
    assert elapsed < 15, f"wait --timeout 0.5 took {elapsed:.1f}s"
    assert cluster.show(job_id)["state"] in ("PENDING", "RUNNING")


@pytest.mark.timeout(90)
def test_preempt_and_cancel_with_an_unknown_id_exit_4_and_act_on_no_job(cluster):
    job_id = cluster.run("--gpus", "1", command="sleep 120")
    cluster.wait_for(lambda: cluster.api_job(job_id)["state"] == "RUNNING", 30, "the job to run")
    for verb in ("preempt", "cancel"):
        result = cluster.cli(verb, job_id, "j-doesnotexist", "j-neither")
        assert result.returncode == 4, (verb, result.stderr)
        assert "'j-doesnotexist', 'j-neither'" in result.stderr, result.stderr
        assert f"none of the 3 jobs given was {verb}" in result.stderr, result.stderr
        assert result.stdout == ""
        job = cluster.show(job_id)
        assert (job["state"], job["preemptions"]) == ("RUNNING", 0), verb
