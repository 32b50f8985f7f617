"""The head's shared runtime: settings, database, clock and wake-ups, passed to services."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from corral.clock import Clock
from corral.head.config import ConfigHolder
from corral.head.desiredcache import DesiredPieces
from corral.head.jobcache import JobCache
from corral.head.lateness import Lateness
from corral.head.livecache import LiveAllocations
from corral.head.nodecache import NodeModels
from corral.head.notify import Notifier
from corral.head.quiet import QuietBeats
from corral.head.samples import SampleStore
from corral.head.servicebook import ServiceBook
from corral.head.settings import HeadSettings
from corral.head.store.db import Database
from corral.model import FairShare


def _ignore(_seconds: float) -> None:
    return None


def no_position(_job_id: str) -> tuple[int, int] | None:
    """No job has a place in the queue (before the first cycle, or when nothing is pending)."""
    return None


@dataclass
class HeadRuntime:
    settings: HeadSettings
    db: Database
    clock: Clock
    notifier: Notifier | None = None
    started_monotonic: float = field(default=0.0)
    # A pending job's place in the queue and the queue's length as of the last scheduling cycle (not
    # stored: it changes with every submit and finish, and is cheap to recompute).
    queue_position: Callable[[str], tuple[int, int] | None] = field(default=no_position)
    # When the scheduler expects a reserved job to start (backfill), as of the last cycle.
    expected_starts: dict[str, datetime] = field(default_factory=dict)
    fair_share_cache: tuple[datetime, FairShare] | None = None  # (computed at, usage)
    fenced_checked_at: datetime | None = None  # when the liveness loop last ended fenced failures
    # Free GPUs per type that cannot serve the largest pending request, as of the last cycle.
    fragmented_gpus: dict[str, float] = field(default_factory=dict)
    job_cache: JobCache = field(default_factory=JobCache)
    live_allocations: LiveAllocations = field(default_factory=LiveAllocations)  # the snapshot's, kept
    # Service received and finished jobs' sizes, for policies that read them (``default``).
    service: ServiceBook = field(default_factory=ServiceBook)
    node_models: NodeModels = field(default_factory=NodeModels)
    samples: SampleStore = field(default_factory=SampleStore)
    quiet: QuietBeats = field(default_factory=QuietBeats)
    desired_pieces: DesiredPieces = field(default_factory=DesiredPieces)  # each node's tasks as JSON
    lateness: Lateness = field(default_factory=Lateness)  # when the head itself did not run
    # Called after every committed change to what gateways route by (``services.serving.watch``).
    service_watchers: list[Callable[[], None]] = field(default_factory=list)
    # Observers of what happens (metrics); each gets a number of seconds.
    on_job_start: Callable[[float], None] = field(default=_ignore)
    on_cycle: Callable[[float], None] = field(default=_ignore)
    # Set when the server begins to shut down: long polls and followed streams end at once, cleanly.
    stopping: bool = False

    def __post_init__(self) -> None:
        self.started_monotonic = self.clock.monotonic()
        self.config = ConfigHolder(self.settings.config_path)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self.db.read() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction; after it commits, wake the agents and loops it concerns."""
        with self.db.write() as session:
            yield session
        bumped: dict[str, int] = session.info.pop("bumped_nodes", {})
        wake = session.info.pop("wake_scheduler", False)
        for waited in session.info.pop("job_waits", []):
            self.on_job_start(waited)
        if self.notifier is not None:
            self.notifier.nodes_changed(bumped.items())
            if wake:
                self.notifier.wake_scheduler()
