"""A warning about a lasting condition is said when it starts, once a minute while it lasts, and when it ends."""

from __future__ import annotations

import logging

import pytest

from corral.serve.proxy.repeated import RepeatedWarning


def test_a_lasting_failure_is_said_once_a_minute_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warning = RepeatedWarning(logging.getLogger("test.gateway"), "cannot refresh", clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.gateway"):
        for _ in range(240):  # two minutes of failures, two a second
            warning.failed(ConnectionError("refused"))
            now[0] += 0.5
        warning.succeeded()
        warning.succeeded()  # already said
        warning.failed(ConnectionError("refused again"))
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "cannot refresh: refused",
        "cannot refresh: refused (for 60 s; 119 more times since the last warning)",
        "cannot refresh: works again after 120 s",
        "cannot refresh: refused again",
    ]
