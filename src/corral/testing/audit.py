"""Checks on a cluster's event log: was a GPU ever held by two tasks at once, is any still held."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from corral.client.calls import Call, HeadApi


def all_events(client: HeadApi) -> list[dict[str, Any]]:
    """The whole event log, oldest first."""
    events: list[dict[str, Any]] = []
    after = 0
    while True:
        page = client.transport.send(Call("GET", "/v1/events", params=[("after", str(after)), ("limit", "10000")]))
        events += page
        if len(page) < 10_000:
            return events
        after = page[-1]["id"]


def double_holds(events: Sequence[dict[str, Any]]) -> list[str]:
    """Every time a (node, GPU) slot was handed to a task while another task still held it,
    by the audit trail of ``job.placed`` and ``task.released`` events (fractional holds add up)."""
    held: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    clashes = []
    for event in events:
        if event["kind"] == "job.placed":
            for task in event["data"]["tasks"]:
                for gpu in task["gpus"]:
                    slot = held[(task["node"], gpu)]
                    slot[task["task"]] = task["fraction"]
                    if sum(slot.values()) > 1.0 + 1e-9:
                        clashes.append(f"{task['node']} GPU {gpu} given to {task['task']} while held by {sorted(slot)}")
        elif event["kind"] == "task.released":
            for gpu in event["data"]["gpus"]:
                held[(event["node"], gpu)].pop(event["data"]["task"], None)
    return clashes


def still_held(events: Sequence[dict[str, Any]]) -> list[str]:
    """Tasks placed but never released, by the audit trail."""
    placed = {t["task"] for e in events if e["kind"] == "job.placed" for t in e["data"]["tasks"]}
    released = {e["data"]["task"] for e in events if e["kind"] == "task.released"}
    return sorted(placed - released)


def overlapping(spans: dict[str, list[tuple[float, float]]]) -> list[tuple[str, str]]:
    """Pairs of attempts (keyed by where they ran) whose [first, last] sign of life overlap in time."""
    ranges = sorted((min(t for t, _ in s), max(t for _, t in s), where) for where, s in spans.items() if s)
    return [(a[2], b[2]) for a, b in itertools.pairwise(ranges) if b[0] < a[1]]
