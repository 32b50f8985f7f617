"""The head keeps the garbage collector's pauses short (full collections stop every thread), and out of
its scheduling cycles."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace

import pytest

from corral.collector import collections_paused
from corral.head.services.scheduling import run_cycle
from corral.model import Job
from corral.sched import get_policy

CHECK = textwrap.dedent(
    """
    import gc
    from corral.head.app import create_app  # what a head has loaded before it serves
    from corral.head.main import GC_YOUNG_THRESHOLD, quieten_garbage_collection

    before = len(gc.get_objects())
    quieten_garbage_collection()
    print(gc.get_freeze_count() >= before // 2, len(gc.get_objects()) < before // 10,
          gc.get_threshold()[0] == GC_YOUNG_THRESHOLD)
    """
)


def test_what_exists_at_start_is_frozen_and_young_collections_are_rarer():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True", "True"]


def test_collections_wait_while_any_caller_is_inside_and_resume_after_the_last():
    assert gc.isenabled()
    entered, release = threading.Event(), threading.Event()

    def other_cycle() -> None:
        with collections_paused():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other_cycle)
    with collections_paused():
        assert not gc.isenabled()
        thread.start()
        assert entered.wait(10)
    assert not gc.isenabled()  # the other thread is still inside
    release.set()
    thread.join(10)
    assert gc.isenabled()

    with pytest.raises(RuntimeError), collections_paused():
        raise RuntimeError("a cycle that fails")
    assert gc.isenabled()


def test_collections_left_off_before_stay_off():
    gc.disable()
    try:
        with collections_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_heads_scheduling_cycle_runs_with_collections_paused(head):
    seen: list[bool] = []
    default = get_policy("default")

    def recording_order(job: Job) -> tuple[int, ...]:
        seen.append(gc.isenabled())
        return default.job_order(job)

    head.register("n1", gpus=8)
    head.submit({"command": "a", "resources": {"gpus": 1}})
    assert run_cycle(head.rt, replace(default, job_order=recording_order)).placed == 1
    assert seen and not any(seen)
    assert gc.isenabled()
