"""One head per CORRAL_HOME: a second one refuses to start, naming the first."""

from __future__ import annotations

import os

import pytest

from corral.head.main import _lock_home


def test_a_second_head_of_the_same_home_refuses_to_start(tmp_path):
    first = _lock_home(tmp_path)
    try:
        with pytest.raises(SystemExit, match=rf"another head \(pid {os.getpid()}\) already runs with CORRAL_HOME"):
            _lock_home(tmp_path)
        other = _lock_home(tmp_path / "elsewhere")  # another home: fine
        os.close(other)
    finally:
        os.close(first)
    os.close(_lock_home(tmp_path))  # free again once the first has gone
