"""Pausing the garbage collector's automatic collections while a scheduling cycle runs.

A cycle over a large queue allocates a great many small objects that die young, freed by reference
counting as soon as they are dropped. Each automatic young collection on the way walks the young
objects still alive; every tenth walks the middle generation too, and now and then a full one walks
every object of the process (the snapshot's hundreds of thousands among them). None of that frees
anything a cycle made, yet it costs about a tenth of a large cycle. So automatic collections wait
until the cycle is over: the next allocation after it starts one as usual. Explicit
``gc.collect()`` calls still work inside.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_paused = 0  # callers inside ``collections_paused`` now, over all threads
_enabled_before = False


@contextmanager
def collections_paused() -> Iterator[None]:
    """No automatic collection runs while any caller is inside (the collector is process-wide); when the
    last one leaves, they run again, unless they were off before the first one came in."""
    global _paused, _enabled_before
    with _lock:
        if _paused == 0:
            _enabled_before = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _lock:
            _paused -= 1
            if _paused == 0 and _enabled_before:
                gc.enable()
