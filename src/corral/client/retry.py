"""Calls that are safe to repeat (a submission with an Idempotency-Key) ride out a head restart.

A head that went away after answering this process (restarting, failing over), or that took the
request and gave no answer, is waited for. Where no head has answered yet and nothing listens at
any head URL, there is no head to wait for (none was started, or the URL is wrong): the error comes
at once, saying how to start one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from corral.client.calls import Call, Transport
from corral.client.errors import CorralError, NotACorralHead, NothingListening, Unreachable

RETRY_FOR_S = 30.0
FIRST_PAUSE_S = 0.1
LONGEST_PAUSE_S = 2.0


def retriable(error: CorralError, transport: Transport) -> bool:
    """The head may not have handled the request (no answer, or a server-side failure), and there is a
    head to wait for."""
    if isinstance(error, NothingListening) and not getattr(transport, "answered", True):
        return False
    if isinstance(error, NotACorralHead) and error.status < 500:  # another server's refusal: it will not change
        return False
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
    doubling up to 2 s, for at most ``retry_for_s``; at once when there is no head to wait for."""
    deadline = clock() + retry_for_s
    pause = FIRST_PAUSE_S
    while True:
        try:
            return transport.send(call)
        except CorralError as error:
            if not retriable(error, transport) or clock() + pause > deadline:
                raise
        sleep(pause)
        pause = min(LONGEST_PAUSE_S, pause * 2)
