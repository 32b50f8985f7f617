"""`corral cancel` tells a job it cancelled from one that had already ended, in its text and its JSON."""

from __future__ import annotations

import json

from click.testing import CliRunner

from corral.cli import cancel as cancel_module
from corral.cli.main import cli


class FakeHead:
    """Jobs by id and state; cancel ends the ones not yet ended and says which had, as the head does."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = dict(states)

    def cancel(self, ids: list[str], whole_arrays: bool = False) -> list[dict[str, object]]:
        self.whole_arrays = whole_arrays
        ended = {j for j in ids if self.states[j] not in ("PENDING", "RUNNING")}
        for job_id in ids:
            if job_id not in ended:
                self.states[job_id] = "CANCELLED"
        return [{"id": j, "state": self.states[j], "already_ended": j in ended} for j in ids]


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


def test_array_asks_the_head_for_whole_arrays(monkeypatch):
    head = FakeHead({"j-a": "RUNNING"})
    assert run(monkeypatch, head, "--array", "j-a").exit_code == 0
    assert head.whole_arrays is True
    run(monkeypatch, head, "j-a")
    assert head.whole_arrays is False
