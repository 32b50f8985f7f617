"""The head keeps the garbage collector's pauses short (full collections stop every thread)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
