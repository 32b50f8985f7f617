"""Calls that are safe to repeat (a submission with an Idempotency-Key) ride out a head restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from corral.client.calls import Call, Transport
from corral.client.errors import CorralError, Unreachable

RETRY_FOR_S = 30.0
FIRST_PAUSE_S = 0.1
LONGEST_PAUSE_S = 2.0


def retriable(error: CorralError) -> bool:
    """The head may not have handled the request: no answer, or a server-side failure."""
    return isinstance(error, Unreachable) or error.status >= 500


def send_repeatable(
    transport: Transport,
    call: Call,
    retry_for_s: float = RETRY_FOR_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """Send ``call``; while the head cannot be reached or fails with 5xx, send it again (the same
    request, so the head answers a repeat with what it did the first time), pausing 0.1 s, then
    doubling up to 2 s, for at most ``retry_for_s``."""
    deadline = clock() + retry_for_s
    pause = FIRST_PAUSE_S
    while True:
        try:
            return transport.send(call)
        except CorralError as error:
            if not retriable(error) or clock() + pause > deadline:
                raise
        sleep(pause)
        pause = min(LONGEST_PAUSE_S, pause * 2)
