"""A CORRAL_HOME that cannot be used exits 2 naming it, whatever the command; one that is merely missing
is a machine with no cluster yet, and stays missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral.client.config import dir_problem

COMMANDS = [["status"], ["config"], ["down"], ["up", "--agents", "0"]]


def corral(args: list[str], home: Path | str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CORRAL_HEAD", "CORRAL_TOKEN")}
    env["CORRAL_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "corral", *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def afile(tmp_path: Path) -> Path:
    path = tmp_path / "afile"
    path.write_text("")
    return path


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_a_home_that_is_a_file_names_corral_home(args: list[str], afile: Path) -> None:
    done = corral(args, afile)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: CORRAL_HOME: {afile} is a file, not a directory; point CORRAL_HOME at a directory\n"


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_a_home_under_a_file_names_corral_home(args: list[str], afile: Path) -> None:
    done = corral(args, afile / "sub")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: CORRAL_HOME: cannot create the directory {afile / 'sub'}: {afile} is a file, not a directory;"
        " point CORRAL_HOME at a directory\n"
    )


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no directory can be made")
@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_a_home_that_cannot_be_created_names_corral_home(args: list[str]) -> None:
    done = corral(args, "/proc/corral-home")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: CORRAL_HOME: cannot create the directory /proc/corral-home: ")
    assert not Path("/proc/corral-home").exists()


def test_a_missing_home_is_no_cluster_yet_and_stays_missing(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    for args in (["status"], ["config"]):
        done = corral(args, home)
        assert done.returncode == 3, done.stderr
        assert "no Corral head is configured: start a local cluster with `corral up`" in done.stderr
    done = corral(["down"], home)
    assert (done.returncode, done.stdout) == (0, "nothing was running\n")
    assert os.listdir(tmp_path) == []


def test_checking_a_missing_directory_leaves_nothing_behind(tmp_path: Path) -> None:
    assert dir_problem(tmp_path / "a" / "b") is None
    assert dir_problem(tmp_path) is None
    assert os.listdir(tmp_path) == []
