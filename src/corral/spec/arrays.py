"""Job arrays: ``0-99``, ``1,3,5-7`` or ``0-99%8`` (at most 8 elements at once)."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ARRAY_SIZE = 10_000
ARRAY_HELP = "indices such as 0-99, 1,3,5-7 or 0-99%8 (at most 8 at once)"
_PART_RE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


@dataclass(frozen=True)
class ArraySpec:
    """The indices of an array's elements, ascending, and how many may run at once (None: no limit)."""

    indices: tuple[int, ...]
    limit: int | None = None


def parse_array(text: str) -> ArraySpec:
    """Parse an array expression; ``ValueError`` says what was wrong and what would be valid."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"expected {ARRAY_HELP}, got {text!r}")
    body, percent, limit_text = text.strip().partition("%")
    limit = None
    if percent:
        if not (limit_text.isascii() and limit_text.isdigit()) or int(limit_text) < 1:
            raise ValueError(
                f"the limit after % must be a whole number of at least 1 (such as 0-99%8), got {limit_text!r}"
            )
        limit = int(limit_text)
    indices: set[int] = set()
    for part in body.split(","):
        match = _PART_RE.match(part.strip())
        if not match:
            raise ValueError(f"bad part {part.strip()!r} in {text!r}; expected {ARRAY_HELP}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError(f"range {part.strip()!r} ends before it starts")
        if last - first + 1 + len(indices) > MAX_ARRAY_SIZE:
            raise ValueError(f"{text!r} has more than {MAX_ARRAY_SIZE} elements")
        part_indices = range(first, last + 1)
        if twice := indices.intersection(part_indices):
            raise ValueError(f"index {min(twice)} is listed twice in {text!r}; list each index once")
        indices.update(part_indices)
    return ArraySpec(tuple(sorted(indices)), limit)
