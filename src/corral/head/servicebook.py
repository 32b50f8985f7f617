"""What the leader keeps in memory of jobs' service, for policies that read it (``default``).

The finished-jobs history (``corral.sched.history.FinishedJobs``) and, per live job, what was
worked out once and need not be again: the estimate it got when it joined the queue, and the
GPU-seconds of its runs that ended. ``corral.head.services.service`` fills and reads it; a head
that starts leading starts from an empty book and loads it again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from corral.model import Job
from corral.sched.history import FinishedJobs


@dataclass
class ServiceBook:
    # None until loaded from the database (at the first cycle of a head that leads).
    finished: FinishedJobs | None = None
    # The newest event when the history was last brought up to date.
    event_id: int = 0
    # Ended jobs already fed (or waiting to be), by when they ended: an end event seen twice counts once.
    ended: dict[str, datetime] = field(default_factory=dict)
    # Ended jobs whose tasks still hold GPUs: (user, team); fed once their tasks are gone.
    unsettled: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Live job → (the generation it joined the queue with, its estimate then).
    estimates: dict[str, tuple[int, float | None]] = field(default_factory=dict)
    # Live job → ((generation, live tasks) when summed, GPU-seconds of its tasks that ended).
    earlier: dict[str, tuple[tuple[int, int], float]] = field(default_factory=dict)
    # Pending job → (the job cache's value, its generation, that value with its service filled in).
    views: dict[str, tuple[Job, int, Job]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """Forget everything: the next cycle loads the history again."""
        with self.lock:
            self.finished = None
            self.event_id = 0
            self.ended.clear()
            self.unsettled.clear()
            self.estimates.clear()
            self.earlier.clear()
            self.views.clear()
