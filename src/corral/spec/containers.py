"""A task's container: the image to run it in and the host directories mounted into it."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

MODES = ("ro", "rw")
# A reference or a path; never starting with '-', so that no image can pass for a runtime's flag.
_IMAGE_RE = re.compile(r"^[A-Za-z0-9_./:@+=~][A-Za-z0-9_./:@+=~\-]{0,511}$")


@dataclass(frozen=True)
class Volume:
    """One ``HOST:CONTAINER[:ro|rw]`` mount."""

    host: str
    container: str
    read_only: bool = False

    def __str__(self) -> str:
        return f"{self.host}:{self.container}:{'ro' if self.read_only else 'rw'}"


def parse_volume(text: str) -> Volume:
    """``/data:/data:ro`` → Volume; ValueError saying what a valid one looks like."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"expected HOST:CONTAINER or HOST:CONTAINER:ro|rw with absolute paths, got {text!r}")
    host, container, *mode = parts
    for side, path in (("host", host), ("container", container)):
        if not path.startswith("/"):
            raise ValueError(f"the {side} path must be absolute (start with /), got {path!r} in {text!r}")
        if "," in path or "\x00" in path or any(c.isspace() for c in path):
            raise ValueError(f"the {side} path must not contain a comma, a space or NUL, got {path!r}")
    if mode and mode[0] not in MODES:
        raise ValueError(f"mode must be ro (read-only) or rw (read-write), got {mode[0]!r} in {text!r}")
    return Volume(posixpath.normpath(host), posixpath.normpath(container), bool(mode) and mode[0] == "ro")


def _volume_text(value: Any) -> Any:
    if isinstance(value, str):
        parse_volume(value)
    return value


def _image(value: str) -> str:
    if not _IMAGE_RE.match(value):
        raise ValueError(
            f"bad image {value!r}: expected a reference such as nvcr.io/nvidia/pytorch:24.05-py3, "
            "or a path to an image file (.sif, .sqsh); no spaces, not starting with '-'"
        )
    return value


Image = Annotated[str, AfterValidator(_image)]
VolumeText = Annotated[str, BeforeValidator(_volume_text)]
