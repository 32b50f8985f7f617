"""The whole suite runs in one process: keep its garbage collector's full passes short.

A full collection walks every object the collector tracks, and most of this process's objects live
for the whole session (modules, classes, caches, session fixtures). As a head does at start
(``corral.head.main.quieten_garbage_collection``), they are frozen (left out of the collector's
walks): once collection is done, and again before each test module, after a collection has freed
what the previous module left. Objects still die when nothing refers to them; only cycles among
frozen objects stay until the process ends.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

_frozen_before: list[Path] = []  # the module whose tests come next, once frozen for it


def _freeze() -> None:
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    _freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if _frozen_before[-1:] != [item.path]:
        _frozen_before[:] = [item.path]
        _freeze()
