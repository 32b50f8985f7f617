"""The node health command."""

import asyncio
import time

import psutil

from corral.agent.health import run_health_command


def test_a_passing_command_reports_nothing():
    assert asyncio.run(run_health_command("true", 5)) == ""


def test_a_failing_command_reports_its_exit_and_last_line():
    problem = asyncio.run(run_health_command("echo checking; echo 'disk /data is full'; exit 3", 5))
    assert problem == "health command `echo checking; echo 'disk /data is full'; exit 3` exited 3: disk /data is full"


def test_a_hanging_command_is_killed_with_what_it_started_and_reported():
    started = time.monotonic()
    problem = asyncio.run(run_health_command("sleep 37.25; true", 0.3))
    assert "did not finish within 0.3s" in problem
    assert time.monotonic() - started < 10  # nothing it started holds its output open
    left = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "37.25"]]
    assert left == []


def test_a_passing_command_is_not_reported_failed_while_orphans_are_reaped(reaping_meanwhile):
    """The command runs in a session of its own, as tasks do; the agent's orphan reaper, which runs in a
    thread every half second, must leave its exit status to the check (asyncio then reports 255, and a
    healthy node would go NOT_READY with its jobs requeued)."""

    async def checks() -> list[str]:
        return [await run_health_command("true", 5) for _ in range(100)]

    problems = asyncio.run(checks())
    assert [p for p in problems if p] == []
