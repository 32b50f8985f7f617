"""`corral down` waits as long as the running jobs' grace periods ask, past its default."""

from __future__ import annotations

from typing import Any

import pytest

from corral.cli import downwait
from corral.client.errors import Unreachable


class FakeApi:
    def __init__(self, running: list[dict[str, Any]] | None) -> None:
        self.running = running

    def jobs(self, states: list[str]) -> list[dict[str, Any]]:
        assert states == ["RUNNING"]
        if self.running is None:
            raise Unreachable("no head")
        return self.running


@pytest.mark.parametrize(
    ("graces", "expected"),
    [([], 60.0), ([None, 10.0], 60.0), ([30.0], 60.0), ([90.0, None], 120.0), ([86_400.0], 86_430.0)],
)
def test_the_wait_covers_the_longest_grace_period(monkeypatch, capsys, graces, expected) -> None:
    monkeypatch.setattr(downwait, "HeadApi", lambda transport: FakeApi([{"grace_period_s": g} for g in graces]))
    assert downwait.agents_stop_within("http://127.0.0.1:9", "t") == expected
    said = capsys.readouterr().err
    assert ("waiting up to" in said) == (expected > 60.0)
    if expected > 60.0:  # the whole wait, as down waits it
        assert f"waiting up to {expected:g} s" in said


def test_without_an_answer_from_the_head_the_default(monkeypatch) -> None:
    monkeypatch.setattr(downwait, "HeadApi", lambda transport: FakeApi(None))
    assert downwait.agents_stop_within("http://127.0.0.1:9", "t") == downwait.AGENT_STOP_TIMEOUT_S
