"""Parsers for the quantities users write: memory sizes, durations, fake GPU inventories.

Each parser raises ``ValueError`` with a message that says what was wrong and what
would be valid, so that callers (pydantic validators, CLI options) can pass it on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from corral.spec.names import GPU_TYPE_RULE, is_gpu_type
from corral.spec.wording import shown

_MEMORY_UNITS_MB = {
    "": 1.0 / (1024 * 1024),  # plain number of bytes
    "b": 1.0 / (1024 * 1024),
    "k": 1.0 / 1024,
    "kb": 1.0 / 1024,
    "kib": 1.0 / 1024,
    "ki": 1.0 / 1024,  # Kubernetes' way of writing binary units
    "m": 1.0,
    "mb": 1.0,
    "mib": 1.0,
    "mi": 1.0,
    "g": 1024.0,
    "gb": 1024.0,
    "gib": 1024.0,
    "gi": 1024.0,
    "t": 1024.0 * 1024,
    "tb": 1024.0 * 1024,
    "tib": 1024.0 * 1024,
    "ti": 1024.0 * 1024,
}
_MEMORY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
MEMORY_HELP = "a size such as 512MB, 64GB, 64Gi or 1.5TB"

_DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd])")
DURATION_HELP = "a duration such as 90s, 30m, 2h, 1d, 1h30m or HH:MM:SS"
MAX_MEMORY_MB = 2**31 - 1  # 2 PiB: more than any node has, and what the database's integer holds
MAX_DURATION_S = 10 * 365 * 86400.0


# YAML 1.1 reads an exponent without a decimal point (1e3) as text: such text is still a number.
NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def whole_number(value: object) -> object:
    """A value for a whole-number field: text that reads as a number (``"5"``, ``1e3``, which YAML 1.1 leaves
    as text) becomes that number, and a number with nothing after the point (``2.0``, ``1e0``) its integer.
    Anything else is left for the field's own checks, which refuse a fraction (``1.5``) as not whole; a boolean
    is refused here, as it is not 1 or 0 of anything."""
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number, not {str(value).lower()}")
    number = float(value) if isinstance(value, str) and NUMBER_RE.fullmatch(value.strip()) else value
    if isinstance(number, float) and number.is_integer() and abs(number) <= 2**53:
        return int(number)
    return value  # as given, so that a refusal shows it as written (1e30, '1.5')


def parse_memory_mb(value: str | int | float) -> int:
    """Memory size in MiB; units are binary (1GB = 1024MB), as GPU vendors print them."""
    if isinstance(value, bool):
        raise ValueError(f"expected {MEMORY_HELP}, got {str(value).lower()}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        if not value <= MAX_MEMORY_MB:  # also refuses NaN
            raise ValueError(f"must be at most {MAX_MEMORY_MB} MB, got {value}")
        return _whole_mb(value, value)
    if not isinstance(value, str):
        raise ValueError(f"expected {MEMORY_HELP}, got {shown(value)}")
    match = _MEMORY_RE.match(value)
    if not match:
        raise ValueError(f"expected {MEMORY_HELP}, got {value!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    if unit not in _MEMORY_UNITS_MB:
        raise ValueError(f"unknown unit {match.group(2)!r} in {value!r}; expected {MEMORY_HELP}")
    megabytes = number if unit == "" else number * _MEMORY_UNITS_MB[unit]  # a bare number is MiB, like the int form
    if megabytes > MAX_MEMORY_MB:
        raise ValueError(f"{value!r} is more than the largest size accepted ({MAX_MEMORY_MB} MB)")
    return _whole_mb(megabytes, value) if unit == "" else round(megabytes)


def _whole_mb(number: float, value: object) -> int:
    """A number without a unit counts MiB, and only whole ones: 1.5 would silently lose half a MiB."""
    if number != int(number):
        raise ValueError(f"a number without a unit is MiB and must be whole, got {value!r}; give a unit, such as 1.5GB")
    return int(number)


def parse_duration_s(value: str | int | float, allow_zero: bool = False) -> float:
    """Duration in seconds from ``90``, ``90s``, ``2h``, ``1h30m``, ``MM:SS`` or ``H:MM:SS``.

    With ``allow_zero`` (a grace period: SIGKILL at once) 0 is valid, and only a negative one is refused.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_HELP}, got {str(value).lower()}")
    if isinstance(value, int | float):
        if value < 0 or (value == 0 and not allow_zero):
            raise ValueError(f"{_sign_rule(allow_zero)}, got {value}")
        if not value <= MAX_DURATION_S:  # also refuses NaN
            raise ValueError(f"must be at most {MAX_DURATION_S:.0f} s (ten years), got {value}")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected {DURATION_HELP}, got {shown(value)}")
    text = value.strip().lower()
    if text.startswith("-"):
        raise ValueError(f"{_sign_rule(allow_zero)}, got {value!r}")
    seconds: float
    if ":" in text:
        seconds = _clock_s(text, value)
    elif re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", text):
        seconds = float(text)
    else:
        seconds = _units_s(text, value)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError(f"{_sign_rule(allow_zero)}, got {value!r}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{value!r} is longer than ten years")
    return seconds


def _units_s(text: str, value: str) -> float:
    """``1d``, ``2h``, ``1h30m``, ``1d2h3m4s``: units from the largest down, each once; a part after the first
    stays below the unit above it (hours below 24, minutes and seconds below 60), as on a clock."""
    pos, seconds, previous = 0, 0.0, None
    for match in _DURATION_PART_RE.finditer(text):
        if match.start() != pos:
            break
        number, unit = float(match.group(1)), match.group(2)
        size = _DURATION_UNITS_S[unit]
        if previous is not None:
            above = _DURATION_UNITS_S[previous]
            if size >= above:
                raise ValueError(f"units must go from the largest down, each once (as in 1h30m), got {value!r}")
            if number * size >= above:
                names = _UNIT_NAMES[unit], _UNIT_NAMES[previous]
                raise ValueError(f"{names[0]} must be below {above // size} after {names[1]}, got {value!r}")
        seconds += number * size
        pos, previous = match.end(), unit
    if pos != len(text) or not text:
        raise ValueError(f"expected {DURATION_HELP}, got {value!r}")
    return seconds


_UNIT_NAMES = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _sign_rule(allow_zero: bool) -> str:
    return "must not be negative (0 kills at once)" if allow_zero else "must be positive"


def _clock_s(text: str, value: str) -> float:
    """``MM:SS`` or ``H:MM:SS``: the first part may be any size, the ones after it below 60."""
    parts = text.split(":")
    if len(parts) > 3 or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"expected {DURATION_HELP}, got {value!r}")
    units = ("minutes", "seconds")[-(len(parts) - 1) :]
    for unit, part in zip(units, parts[1:], strict=True):
        if int(part) >= 60:
            raise ValueError(f"{unit} must be below 60 in {'H:MM:SS' if len(parts) == 3 else 'MM:SS'}, got {value!r}")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds


@dataclass(frozen=True)
class GpuGroup:
    """``count`` GPUs of one type, e.g. ``8xH100:80GB``."""

    count: int
    gpu_type: str
    memory_mb: int


FAKE_GPUS_HELP = "comma-separated COUNTxTYPE[:MEMORY] groups such as 8xH100:80GB or 4xA100:40GB,2xL4:24GB"
_GPU_GROUP_RE = re.compile(r"^([0-9]+)x([A-Za-z0-9][A-Za-z0-9_.\-]*)(?::(.+))?$")
DEFAULT_FAKE_GPU_MEMORY_MB = 80 * 1024  # a group without :MEMORY, whatever its type
MAX_GPUS_PER_NODE = 64  # as many as a job may ask for on one node
LABEL_KEY_HELP = "letters, digits and _ . - / (starting with a letter or digit, at most 63)"
_LABEL_KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,62}")
LABEL_VALUE_HELP = "letters, digits and _ . - (starting and ending with a letter or digit, at most 63)"
_LABEL_VALUE_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.\-]{0,61}[A-Za-z0-9])?")  # as Kubernetes, but not empty


def parse_gpu_groups(value: str) -> list[GpuGroup]:
    """Parse a fake GPU inventory such as ``4xA100:40GB,2xL4:24GB``: at most ``MAX_GPUS_PER_NODE`` GPUs in all,
    each with some memory (80GB where a group names none)."""
    groups: list[GpuGroup] = []
    for raw in value.split(","):
        item = raw.strip()
        match = _GPU_GROUP_RE.match(item)
        if not match:
            raise ValueError(f"bad GPU group {item!r}: expected {FAKE_GPUS_HELP}")
        count = int(match.group(1))
        if count < 1:
            raise ValueError(f"bad GPU group {item!r}: count must be at least 1")
        if re.match(r"[0-9]+x", match.group(2)):  # 9x8xH100: a count twice, or a missing comma
            raise ValueError(f"bad GPU group {item!r}: give one count per group, as in {FAKE_GPUS_HELP}")
        memory_mb = DEFAULT_FAKE_GPU_MEMORY_MB
        if match.group(3):
            try:
                memory_mb = parse_memory_mb(match.group(3))
            except ValueError as exc:
                raise ValueError(f"bad GPU group {item!r}: {exc}") from None
            if memory_mb < 1:
                raise ValueError(f"bad GPU group {item!r}: GPU memory must be at least 1MB, such as 80GB")
        groups.append(GpuGroup(count=count, gpu_type=match.group(2), memory_mb=memory_mb))
    total = sum(g.count for g in groups)
    if total > MAX_GPUS_PER_NODE:
        raise ValueError(f"{value!r} is {total} GPUs; a node has at most {MAX_GPUS_PER_NODE}")
    return groups


def comma_entries(text: str) -> list[str]:
    """The entries of a comma-separated option such as ``rack=r1,nvlink=nv0``, stripped; nothing (or blanks
    only) is no entry. An empty entry, such as a trailing comma leaves, raises ``ValueError`` naming it."""
    if not text.strip():
        return []
    parts = [part.strip() for part in text.split(",")]
    for position, part in enumerate(parts, 1):
        if not part:
            raise ValueError(
                f"got an empty entry (entry {position} of {len(parts)} in {text!r}): remove the extra comma"
            )
    return parts


def parse_labels(value: str) -> dict[str, str]:
    """Parse ``k=v,k2=v2`` node labels; a key may appear once, and holds only ``LABEL_KEY_HELP``;
    a value holds only ``LABEL_VALUE_HELP``."""
    labels: dict[str, str] = {}
    try:
        items = comma_entries(value)
    except ValueError as exc:
        raise ValueError(f"expected key=value pairs such as rack=r1,nvlink=nv0, {exc}") from None
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad label {item!r}: expected key=value pairs such as rack=r1,nvlink=nv0")
        key = key.strip()
        if key in labels:
            raise ValueError(f"label key {key!r} is given twice; give each key once")
        labels[key] = check_label(key, val.strip())
    return labels


def check_label(key: str, value: str) -> str:
    """The value of label ``key``, when the key holds ``LABEL_KEY_HELP`` and the value ``LABEL_VALUE_HELP``."""
    if not _LABEL_KEY_RE.fullmatch(key):
        raise ValueError(f"bad label key {key!r}: a key holds {LABEL_KEY_HELP}")
    if not value:
        raise ValueError(f"label {key!r} has no value: give {key}=VALUE, where a value holds {LABEL_VALUE_HELP}")
    if not _LABEL_VALUE_RE.fullmatch(value):
        raise ValueError(f"bad value {value!r} of label {key!r}: a value holds {LABEL_VALUE_HELP}")
    return value


def parse_env_pair(value: str) -> tuple[str, str]:
    """Parse one ``KEY=VALUE`` environment assignment."""
    key, sep, val = value.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise ValueError(f"bad environment assignment {value!r}: expected KEY=VALUE with KEY a shell name")
    return key, val


MIN_GPU_SPEED = 0.001
"""The slowest speed a GPU type may have: a thousandth of the reference type's (a job then runs 1,000 × longer)."""


def check_gpu_speeds(speeds: dict[str, float]) -> dict[str, float]:
    """A speed table (GPU type → run-time speed); every speed must be at least ``MIN_GPU_SPEED``."""
    for gpu_type, speed in speeds.items():
        if not gpu_type.strip():
            raise ValueError(f"has an empty GPU type name ({gpu_type!r}): give a type name such as H100")
        if not is_gpu_type(gpu_type):
            raise ValueError(f"bad GPU type {gpu_type!r}: {GPU_TYPE_RULE}")
        if not speed >= MIN_GPU_SPEED:
            raise ValueError(f"speed of {gpu_type} must be at least {MIN_GPU_SPEED}, got {speed}")
    return speeds
