"""What filling in the service fields costs a head's cycle (not part of `make test`).

The head fills ``attained_gpu_s`` and ``expected_gpu_s`` (``corral.head.services.history``) at every
cycle, before the scheduler runs. This times that step alone on a real database (SQLite under a
temporary directory): PENDING waiting jobs of 50 users, RUNNING running jobs with two 4-GPU tasks
each, and ENDED finished jobs with one task each in the history. The first cycle loads the history
and makes every job's view; the steady cycles after it find nothing new.

    .venv/bin/python bench/service_fields.py [--pending 100000] [--running 5000] [--ended 20000] [--cycles 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from corral.head.servicebook import ServiceBook
from corral.head.services.history import HeldTask, fill_pending
from corral.head.store.db import Database, sqlite_url
from corral.head.store.tables import JobRow, TaskRow
from corral.model import Job, Request

NOW = datetime(2026, 1, 1, tzinfo=UTC)
USERS = 50


def ended_jobs(db: Database, count: int) -> None:
    with db.write() as session:
        for i in range(count):
            job_id = f"e{i}"
            start, end = NOW - timedelta(seconds=10 * (count - i) + 100), NOW - timedelta(seconds=10 * (count - i))
            session.add(
                JobRow(
                    id=job_id,
                    name=job_id,
                    user=f"u{i % USERS}",
                    team="t",
                    priority=0,
                    state="SUCCEEDED",
                    spec={},
                    nodes=1,
                    gpus_per_node=1.0,
                    gpu_types=[],
                    cpus=None,
                    memory_mb=None,
                    submitted_at=start,
                    started_at=start,
                    finished_at=end,
                )
            )
            session.add(
                TaskRow(
                    id=f"{job_id}/0/0",
                    job_id=job_id,
                    generation=0,
                    node_rank=0,
                    node="n",
                    state="EXITED",
                    gpus=[0],
                    assigned_at=start,
                    started_at=start,
                    finished_at=end,
                )
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--running", type=int, default=5_000)
    parser.add_argument("--ended", type=int, default=20_000)
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args()
    db = Database(sqlite_url(Path(tempfile.mkdtemp()) / "corral.db"))
    db.migrate()
    ended_jobs(db, args.ended)
    request = Request(nodes=1, gpus_per_node=1.0)
    pending = tuple(
        Job(id=f"p{i}", seq=i, request=request, user=f"u{i % USERS}", team="t") for i in range(args.pending)
    )
    generations = {job.id: 0 for job in pending}
    live = [HeldTask(f"r{i}", 0, 4, 1.0, NOW) for i in range(args.running) for _ in range(2)]
    book = ServiceBook()
    took = []
    for cycle in range(args.cycles + 1):
        now = NOW + timedelta(seconds=cycle)
        started = time.perf_counter()
        with db.read() as session:
            _, service = fill_pending(book, session, now, live, generations, pending)
            for i in range(args.running):
                service(f"r{i}", f"u{i % USERS}", "t")
        took.append(time.perf_counter() - started)
    print(f"first cycle (history loaded, every view made): {took[0]:.3f} s")
    print(f"steady cycles: p50 {statistics.median(took[1:]):.3f} s, max {max(took[1:]):.3f} s")


if __name__ == "__main__":
    main()
