"""The storage root: CORRAL_CHECKPOINT_DIR is ROOT/JOB_ID, the same directory for every attempt."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def _corral(home: Path, *args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_HEAD", "CORRAL_TOKEN", "CORRAL_JOIN_TOKEN")}
    result = subprocess.run(
        [sys.executable, "-m", "corral", *args],
        env={**env, "CORRAL_HOME": str(home)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, f"corral {' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.mark.timeout(120)
def test_corral_up_storage_root_puts_every_attempt_in_the_same_checkpoint_directory(tmp_path):
    home, root, work = tmp_path / "home", tmp_path / "shared-fs", tmp_path / "work"
    work.mkdir()
    port = str(_free_port())
    _corral(home, "up", "--agents", "1", "--port", port, "--storage-root", str(root), cwd=work)
    try:
        # The first attempt fails after noting its directory; the second finds the note there.
        command = 'echo "$CORRAL_RESTART_COUNT $CORRAL_CHECKPOINT_DIR" >> "$CORRAL_CHECKPOINT_DIR/attempts"; '
        command += '[ "$CORRAL_RESTART_COUNT" -ge 1 ]'
        job = json.loads(_corral(home, "run", "-o", "json", "--max-restarts", "1", "--", command, cwd=work))
        _corral(home, "wait", job["id"], "--timeout", "60", cwd=work)
        shown = json.loads(_corral(home, "show", "-o", "json", job["id"], cwd=work))
        expected = root.resolve() / job["id"]
        assert shown["checkpoint_dir"] == str(expected)
        assert (expected / "attempts").read_text().splitlines() == [f"0 {expected}", f"1 {expected}"]
        assert not (home / "checkpoints" / job["id"]).exists()
    finally:
        _corral(home, "down", cwd=work)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
