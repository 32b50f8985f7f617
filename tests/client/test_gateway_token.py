"""`corral gateway` with a token the head refuses exits 5 at once instead of polling forever."""

from __future__ import annotations

import subprocess
import sys

from corral.testing.net import free_port


def test_a_gateway_whose_token_the_head_refuses_exits_5(live_head, tmp_path):
    args = [sys.executable, "-m", "corral", "gateway", "--head", live_head.url, "--token", "ca_bogus"]
    env = {"CORRAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [*args, "--port", str(free_port())], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 5, done.stderr
    assert "token" in done.stderr


def test_a_gateway_with_the_admin_token_passes_the_check(live_head):
    from corral.cli.serve import _check_credentials

    _check_credentials(live_head.url, live_head.admin_token)  # no error: the head accepts it
