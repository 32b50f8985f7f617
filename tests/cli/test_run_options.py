"""`corral run` sets every job field a cluster config or a pipeline needs: class, queue, dependencies, arrays."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

import corral.cli.run
from corral.cli.main import cli, main


class FakeApi:
    """What the command sends (the head's own checks are tested through the head)."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def submit(self, body: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        self.sent.append(body)
        return {"id": "j-one"}

    def submit_batch(self, bodies: list[dict[str, Any]], idempotency_key: str | None = None) -> list[str]:
        self.sent.append(bodies)
        return ["j-a0", "j-a1", "j-a2"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi()
    monkeypatch.setattr(corral.cli.run, "api", lambda: api)
    return api


def test_class_queue_and_dependencies_go_in_the_job(fake: FakeApi) -> None:
    args = ["run", "--priority-class", "high", "--queue", "fast", "--after-ok", "j-x", "--after-ok", "j-y"]
    result = CliRunner().invoke(cli, [*args, "--after-any", "j-z", "--", "echo", "hi"])
    assert result.exit_code == 0, result.output
    body = fake.sent[0]
    assert (body["priority_class"], body["queue"]) == ("high", "fast")
    assert (body["after_ok"], body["after_any"]) == (["j-x", "j-y"], ["j-z"])


def test_an_array_prints_every_id(fake: FakeApi) -> None:
    result = CliRunner().invoke(cli, ["run", "--array", "0-2%1", "-o", "json", "--", "echo", "hi"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"id": "j-a0", "ids": ["j-a0", "j-a1", "j-a2"]}
    assert fake.sent[0][0]["array"] == "0-2%1"


def test_a_bad_array_exits_2_naming_the_option(fake: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["run", "--array", "5-2", "--", "echo", "hi"])
    assert ended.value.code == 2
    assert "--array (array): range '5-2' ends before it starts" in capsys.readouterr().err and not fake.sent
