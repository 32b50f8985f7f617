"""The leader lease and its fencing token (on both backends; several heads need PostgreSQL)."""

from datetime import timedelta

from corral.head.leader import LEASE_S, Leadership, still_leading


def test_one_head_leads_until_its_lease_expires(head):
    a = Leadership(head.rt, holder="host-a:/srv/a")
    b = Leadership(head.rt, holder="host-b:/srv/b")
    assert a.try_lead() and a.token == 1
    assert not b.try_lead()
    head.clock.advance(LEASE_S / 2)
    assert a.try_lead() and a.token == 1  # renewed, same token
    assert not b.try_lead()
    head.clock.advance(LEASE_S + 0.1)
    assert b.try_lead() and b.token == 2  # expired: taken over with a new fencing token
    assert not a.try_lead() and a.token is None


def test_a_head_restarted_in_place_takes_its_lease_back_at_once(head):
    Leadership(head.rt, holder="host-a:/srv/a").try_lead()
    again = Leadership(head.rt, holder="host-a:/srv/a")  # a new process: it does not know the old token
    assert again.try_lead() and again.token == 2


def test_resigning_lets_another_head_lead_at_once(head):
    a = Leadership(head.rt, holder="host-a:/srv/a")
    a.try_lead()
    a.resign()
    assert Leadership(head.rt, holder="host-b:/srv/b").try_lead()


def test_a_plan_from_a_head_that_lost_the_lease_is_not_applied(head):
    agent = head.register("n1", gpus=2)
    job = head.submit({"command": "x", "resources": {"gpus": 1}})["id"]
    stale = Leadership(head.rt, holder="host-a:/srv/a")
    assert stale.try_lead()
    head.clock.advance(timedelta(seconds=LEASE_S + 1).total_seconds())
    assert Leadership(head.rt, holder="host-b:/srv/b").try_lead()
    head.rt.db.fencing = (stale.holder, 1)  # what the paused old leader still believes
    with head.rt.read() as session:
        assert not still_leading(session, head.rt.db)
    assert head.cycle().placed == 0
    assert head.job(job)["state"] == "PENDING"
    assert agent.tasks() == []
    head.rt.db.fencing = None  # no election (a head whose loops the tests drive)
    assert head.cycle().placed == 1


def test_a_head_that_lost_the_lease_neither_declares_nodes_lost_nor_ends_jobs_on_the_clock(head):
    agent = head.register("n1", gpus=1)
    job = head.submit({"command": "x", "resources": {"gpus": 1}, "time_limit": "10s"})["id"]
    head.cycle()
    [task] = agent.tasks()
    agent.beat([head.running(task)])
    stale = Leadership(head.rt, holder="host-a:/srv/a")
    assert stale.try_lead()
    head.clock.advance(max(LEASE_S + 1, 11))  # past the lease, the node timeout and the time limit
    assert Leadership(head.rt, holder="host-b:/srv/b").try_lead()
    head.rt.db.fencing = (stale.holder, 1)  # what the paused old leader still believes
    assert head.check_time_limits() == [] and head.check_nodes() == []
    assert head.nodes()["n1"]["state"] == "READY" and head.job(job)["state"] == "RUNNING"
    head.rt.db.fencing = None  # the leader's own checks go ahead
    assert head.check_time_limits() == [job]
    assert head.check_nodes() == ["n1"]


def test_a_head_that_begins_to_stop_resigns_within_a_renewal_and_wakes_its_long_polls(head):
    import asyncio
    import time

    from corral.head.leader import RENEW_S, lead_while_elected
    from corral.head.notify import Notifier

    async def scenario() -> tuple[float, bool]:
        head.rt.notifier = Notifier(asyncio.get_running_loop())
        leading = asyncio.create_task(lead_while_elected(head.rt, lambda: []))
        poll = asyncio.create_task(head.rt.notifier.wait_for_change("n1", 0, 0, 60.0))
        await asyncio.sleep(0.2)
        head.rt.stopping = True  # as the server does when a SIGTERM begins its shutdown
        head.rt.notifier.wake_all()
        started = time.monotonic()
        await asyncio.wait_for(poll, 1.0)  # the long poll answers at once
        await asyncio.wait_for(leading, RENEW_S + 2.0)
        return time.monotonic() - started, poll.done()

    took, woke = asyncio.run(scenario())
    assert woke and took <= RENEW_S + 1.0
    assert Leadership(head.rt, holder="host-b:/srv/b").try_lead()  # resigned: another head leads at once
