"""A warning about a condition that may last (the head unreachable), said when it starts, then at most once
a minute with how often it recurred, and once more when it ends: a gateway that retries twice a second
would otherwise write two lines a second for as long as its head is away."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

EVERY_S = 60.0


class RepeatedWarning:
    def __init__(
        self, log: logging.Logger, what: str, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log, self._what, self._every_s, self._clock = log, what, every_s, clock
        self._since: float | None = None  # when the condition started; None while it does not hold
        self._said_at = 0.0
        self._unsaid = 0  # failures since the last line

    def failed(self, exc: BaseException) -> None:
        now = self._clock()
        if self._since is None:
            self._since, self._said_at, self._unsaid = now, now, 0
            self._log.warning("%s: %s", self._what, exc)
        elif now - self._said_at >= self._every_s:
            self._log.warning(
                "%s: %s (for %.0f s; %d more times since the last warning)",
                self._what,
                exc,
                now - self._since,
                self._unsaid,
            )
            self._said_at, self._unsaid = now, 0
        else:
            self._unsaid += 1

    def succeeded(self) -> None:
        if self._since is not None:
            self._log.warning("%s: works again after %.0f s", self._what, self._clock() - self._since)
            self._since = None
