"""One logging setup for the daemons: key=value lines on stderr."""

from __future__ import annotations

import logging
import sys


def setup_logging(component: str, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s level=%(levelname)s component={component} logger=%(name)s msg=%(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for chatty in ("httpx", "httpcore"):  # one line per request drowns what matters
        logging.getLogger(chatty).setLevel(logging.WARNING)
