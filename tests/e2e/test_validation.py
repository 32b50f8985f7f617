"""Refused submissions: exit 2, a message naming the field and what is valid, and no job created."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.e2e

BAD_FILES = {
    "yaml-syntax": ('name: broken\ncommand: "echo hi"\nresources: {gpus: 1\nnodes: 1\n', [re.compile(r"\bline \d+")]),
    "negative-gpus": ('command: "echo hi"\nresources: {gpus: -1}\n', ["resources.gpus"]),
    "unknown-field": (
        'command: "echo hi"\ngpus: 1\n',
        ["gpus", "unknown field", re.compile(r"valid fields.*\bresources\b")],
    ),
    "nodes-word": ('command: "echo hi"\nnodes: zero\n', ["nodes"]),
    "time-limit-word": ('command: "echo hi"\ntime_limit: soon\n', ["time_limit", "soon"]),
    "no-command": ("name: nothing\n", ["command"]),
    "resources-a-number": ('command: "echo hi"\nresources: 5\n', ["resources: expected a mapping of fields, got 5;"]),
    "time-limit-boolean": ('command: "echo hi"\ntime_limit: true\n', ["time_limit", "got true"]),
    "grace-period-infinite": (
        'command: "echo hi"\ngrace_period: .inf\n',
        ["grace_period: must be a number at most 86,400"],
    ),
}

BAD_RUNS = {
    "too-many-gpus": (["--gpus", "16"], ["resources", "H100", "4"]),
    "unknown-gpu-type": (["--gpus", "1", "--gpu-type", "B200"], ["B200", "H100"]),
    "gang-too-wide": (["--nodes", "3", "--gpus", "1"], ["nodes", "2"]),
    "bad-env": (["--env", "NOEQUALS"], ["--env"]),
    "env-given-twice": (["--env", "A=1", "--env", "A=2"], ["--env", "A=1", "A=2", "twice"]),
}


def _job_count(cluster) -> int:
    with cluster.client() as client:
        return len(client.jobs(include_all=True))


def _check_refusal(result, expected) -> None:
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr}"
    assert result.stdout == "", "a refused submit must not print an id"
    for needle in expected:
        if isinstance(needle, re.Pattern):
            assert needle.search(result.stderr), f"{needle.pattern!r} not in {result.stderr!r}"
        else:
            assert needle in result.stderr, f"{needle!r} not in {result.stderr!r}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_job_file_is_refused_naming_the_field(cluster, case):
    text, expected = BAD_FILES[case]
    path = cluster.workspace / f"{case}.yaml"
    path.write_text(text)
    before = _job_count(cluster)
    _check_refusal(cluster.cli("submit", str(path)), expected)
    assert _job_count(cluster) == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(BAD_RUNS))
def test_run_the_cluster_cannot_serve_is_refused(cluster, case):
    options, expected = BAD_RUNS[case]
    before = _job_count(cluster)
    _check_refusal(cluster.cli("run", *options, "--", "echo", "hi"), expected)
    assert _job_count(cluster) == before


@pytest.mark.timeout(60)
def test_a_good_file_is_accepted(cluster):
    """The refusals above are about their fields, not about submitting files at all."""
    path = cluster.workspace / "good.yaml"
    path.write_text('name: fine\ncommand: "echo fine"\nresources: {gpus: 1, gpu_type: [H100]}\ntime_limit: 5m\n')
    job_id = cluster.json("submit", str(path))["id"]
    cluster.wait_ok(job_id)
    assert cluster.show(job_id)["name"] == "fine"
    assert cluster.ok("logs", job_id) == "fine\n"
