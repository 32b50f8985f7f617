"""Reading the files users hand to commands (``-`` is standard input), with clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

from corral.client.errors import InvalidRequest


def input_name(file: str) -> str:
    """How messages name ``file``: ``-`` is standard input."""
    return "standard input" if file == "-" else file


def read_input(file: str, what: str) -> str:
    """The text of ``file`` (``-``: standard input); exit 2 naming the file if it cannot be read."""
    try:
        return sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidRequest(f"cannot read {what} {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidRequest(
            f"{what} {file} is not UTF-8 text" if file != "-" else "standard input is not UTF-8 text"
        ) from None
