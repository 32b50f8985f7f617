"""Backfill in the head: a reservation for the first blocked job, shown with its expected start."""

from __future__ import annotations

from datetime import datetime, timedelta


def test_the_blocked_job_gets_an_expected_start_and_only_short_jobs_backfill(head):
    n1 = head.register("n1", gpus=8)
    running = head.submit({"command": "a", "resources": {"gpus": 6}, "time_limit": "1h"})["id"]
    head.cycle()
    n1.run_all()
    started = datetime.fromisoformat(head.job(running)["started_at"])

    big = head.submit({"command": "b", "resources": {"gpus": 8}})["id"]
    endless = head.submit({"command": "c", "resources": {"gpus": 2}})["id"]
    short = head.submit({"command": "d", "resources": {"gpus": 2}, "time_limit": "30m"})["id"]
    assert head.cycle().placed == 1

    assert head.job(short)["tasks"]  # ends before the reservation: backfilled
    reserved = head.job(big)
    assert reserved["state"] == "PENDING"
    assert datetime.fromisoformat(reserved["expected_start"]) == started + timedelta(hours=1)
    assert "expected to start at" in reserved["reason"] and "reserved for it" in reserved["reason"]
    blocked = head.job(endless)
    assert blocked["tasks"] == [] and blocked["expected_start"] is None
    assert blocked["reason"].startswith(f"fits now but starting it would delay job {big}")


def test_without_time_limits_there_is_no_reservation_to_show(head):
    n1 = head.register("n1", gpus=8)
    head.submit({"command": "a", "resources": {"gpus": 6}})
    head.cycle()
    n1.run_all()
    big = head.submit({"command": "b", "resources": {"gpus": 8}})["id"]
    small = head.submit({"command": "c", "resources": {"gpus": 2}})["id"]
    assert head.cycle().placed == 1
    assert head.job(small)["tasks"]
    assert head.job(big)["expected_start"] is None
