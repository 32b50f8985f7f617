"""Fixtures shared by the agent's tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from corral.agent import launch


@pytest.fixture
def reaping_meanwhile() -> Iterator[None]:
    """The agent's orphan reaper run over and over in a thread for the test's length (the agent runs it every
    half second; here far more often, so that it meets every moment a child of the test is a zombie)."""
    stop = threading.Event()

    def reap_all_the_time() -> None:
        while not stop.is_set():
            launch.reap_orphans()
            time.sleep(0.0005)

    reaper = threading.Thread(target=reap_all_the_time, daemon=True)
    reaper.start()
    try:
        yield
    finally:
        stop.set()
        reaper.join(5)
