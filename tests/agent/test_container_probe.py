"""Probing a runtime runs its real command: one that fails is named with what it said."""

import shutil

import pytest

from corral.agent.containers.detect import probe_problem
from corral.agent.containers.oci import Podman


class Unreachable(Podman):
    def probe(self) -> list[str]:
        return ["sh", "-c", "echo starting >&2; echo 'Cannot connect to the daemon' >&2; exit 1"]


class Missing(Podman):
    def probe(self) -> list[str]:
        return ["/nonexistent/podman", "info"]


def test_a_failing_probe_gives_its_last_words():
    assert probe_problem(Unreachable()) == (
        "`sh -c echo starting >&2; echo 'Cannot connect to the daemon' >&2; exit 1` failed: "
        "Cannot connect to the daemon"
    )


def test_a_probe_that_cannot_start_says_so():
    problem = probe_problem(Missing())
    assert problem is not None
    assert problem.startswith("`/nonexistent/podman info`: ")


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed")
def test_an_installed_podman_answers():
    assert probe_problem(Podman()) is None
