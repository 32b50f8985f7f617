"""`corral cancel` tells a job it cancelled from one that had already ended, in its text and its JSON."""

from __future__ import annotations

import json

from click.testing import CliRunner

from corral.cli import cancel as cancel_module
from corral.cli.main import cli
from corral.client.errors import NotFoundError


class FakeHead:
    """Jobs by id and state; cancel ends the ones not yet ended, as the head does."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = dict(states)
        self.calls: list[str] = []

    def job(self, job_id: str) -> dict[str, str]:
        self.calls.append(f"job {job_id}")
        if job_id not in self.states:
            raise NotFoundError(f"no job {job_id}")
        return {"id": job_id, "state": self.states[job_id]}

    def jobs(self, include_all: bool = False, states=(), limit=None) -> list[dict[str, str]]:
        self.calls.append("jobs")
        return [{"id": j, "state": s} for j, s in self.states.items() if s in states]

    def cancel(self, ids: list[str]) -> list[dict[str, str]]:
        for job_id in ids:
            if self.states[job_id] in ("PENDING", "RUNNING"):
                self.states[job_id] = "CANCELLED"
        return [{"id": j, "state": self.states[j]} for j in ids]


def run(monkeypatch, head: FakeHead, *args: str):
    monkeypatch.setattr(cancel_module, "api", lambda timeout_s=30.0: head)
    return CliRunner().invoke(cli, ["cancel", *args])


def test_cancelling_a_cancelled_job_says_it_already_ended(monkeypatch):
    head = FakeHead({"j-a": "RUNNING"})
    assert run(monkeypatch, head, "j-a").output == "j-a: cancelled\n"
    assert run(monkeypatch, head, "j-a").output == "j-a: already ended CANCELLED\n"


def test_a_job_that_ended_otherwise_is_left_as_it_is(monkeypatch):
    head = FakeHead({"j-a": "SUCCEEDED", "j-b": "PENDING"})
    result = run(monkeypatch, head, "j-a", "j-b")
    assert result.output == "j-a: already ended SUCCEEDED\nj-b: cancelled\n"


def test_json_says_which_jobs_had_already_ended(monkeypatch):
    head = FakeHead({"j-a": "CANCELLED", "j-b": "RUNNING", "j-c": "FAILED"})
    rows = json.loads(run(monkeypatch, head, "j-a", "j-b", "j-c", "-o", "json").output)
    assert [(r["id"], r["state"], r["already_ended"]) for r in rows] == [
        ("j-a", "CANCELLED", True),
        ("j-b", "CANCELLED", False),
        ("j-c", "FAILED", True),
    ]


def test_many_jobs_are_told_apart_with_one_list_of_the_jobs_not_yet_ended(monkeypatch):
    states = {f"j-{i}": ("CANCELLED" if i % 2 else "PENDING") for i in range(cancel_module.ONE_BY_ONE_MAX + 5)}
    head = FakeHead(states)
    rows = json.loads(run(monkeypatch, head, *states, "-o", "json").output)
    assert head.calls == ["jobs"]
    assert all(r["already_ended"] == (int(r["id"][2:]) % 2 == 1) for r in rows)


def test_an_unknown_job_is_left_to_the_cancel_request_to_name():
    assert cancel_module.ended_before(FakeHead({}), ["j-unknown"]) == set()  # no exit 4 for this one alone
