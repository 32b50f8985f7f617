"""Tests import their shared wire helpers (``gatewire``) from this directory: pytest runs with
``--import-mode=importlib``, which puts no test directory on ``sys.path`` by itself."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
