"""The groups of a queue: jobs of one team with equal requests, which wait for the same reasons.

Whether a job would borrow quota, and why it waits when it is not looked at one by one, depend only on
its team and request. So the queue numbers each (request, team) once, and a cycle asks its questions
once per group. The numbers stay while the queue is carried from one cycle to the next.
"""

from __future__ import annotations

from collections.abc import Iterable

from corral.model import Job, Request

Group = tuple[Request, str]  # a job's request and team
Pair = tuple[str, tuple[str, ...]]  # a team and the GPU types a request lists: what a quota reads, with a size


class Groups:
    """Numbers for the groups of the kept jobs, each with its first job and how many jobs it has now, and
    (for the quota) its GPUs and the number of its team and listed GPU types (``pairs``)."""

    def __init__(self) -> None:
        self.number: dict[Group, int] = {}
        self.first: list[Job] = []  # by number: a job of the group (all that ``borrows`` and a reason read)
        self.request: list[Request] = []  # by number: the group's request, the one object of its value
        self.members: list[int] = []  # by number: jobs kept now
        self.gpus: list[float] = []  # by number: the GPUs a job of it takes, as the quota ledger counts them
        self.pair: list[int] = []  # by number: the number of its team and listed types in ``pairs``
        self.pairs: dict[Pair, int] = {}

    def join(self, job: Job, request: Request) -> int:
        group = (request, job.team)
        number = self.number.get(group)
        if number is None:
            number = self.number[group] = len(self.first)
            self.first.append(job)
            self.request.append(request)
            self.members.append(0)
            self.gpus.append(request.gpus_per_node * request.nodes)
            self.pair.append(self.pairs.setdefault((job.team, request.gpu_types), len(self.pairs)))
        self.members[number] += 1
        return number

    def member(self, number: int) -> tuple[Job, Request]:
        """A job of the group (all that a waiting job's reason reads is its group), and the group's request."""
        return self.first[number], self.request[number]

    def requests(self) -> set[Request]:
        """The requests of the groups with jobs now."""
        return {group[0] for group, count in zip(self.number, self.members, strict=True) if count > 0}

    def leave(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            self.members[self.number[(job.request, job.team)]] -= 1
