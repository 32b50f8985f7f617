"""Accounting through the head: exact GPU-seconds, cost and energy of scripted runs, across restarts."""

import contextlib
from datetime import timedelta

import pytest

from corral.head.services.accounting import meter

PRICES = {"H100": 2.5, "A100": 1.2}
BEAT_S = 10


def sample(index, watts, utilization=90.0):
    return {"index": index, "utilization": utilization, "memory_used_mb": 1000, "temperature_c": 50.0, "power_w": watts}


class Node:
    """A simulated agent that heartbeats with GPU readings: busy GPUs draw ``busy_w``, idle ones ``idle_w``."""

    def __init__(self, head, name, gpus, gpu_type, busy_w, idle_w=50.0):
        self.head, self.gpus, self.busy_w, self.idle_w = head, gpus, busy_w, idle_w
        self.agent = head.register(name, gpus=gpus, gpu_type=gpu_type)
        self.name = name
        self.running: dict[str, dict] = {}  # task id -> desired task

    def beat(self, reports=()):
        busy = {g for t in self.running.values() for g in t["gpus"]}
        samples = [sample(i, self.busy_w if i in busy else self.idle_w) for i in range(self.gpus)]
        body = {
            "tasks": [self.head.running(t) for t in self.running.values()] + list(reports),
            "applied_version": self.agent.applied,
            "samples": samples,
        }
        response = self.head.client.post(
            f"/v1/agents/{self.name}/heartbeat", json=body, headers=self.head.auth(self.agent.token)
        )
        assert response.status_code == 200, response.text
        self.agent.applied = response.json()["version"]

    def start(self):
        """Start every task the head wants here (they run from this heartbeat on)."""
        for task in self.agent.tasks():
            self.running.setdefault(task["task_id"], task)
        self.beat()

    def exit(self, job_id, code):
        task = next(t for t in self.running.values() if t["job_id"] == job_id)
        del self.running[task["task_id"]]
        self.beat([self.head.exited(task, code)])


def run_for(head, nodes, seconds):
    for _ in range(seconds // BEAT_S):
        head.clock.advance(BEAT_S)
        for node in nodes:
            node.beat()


def usage(head, token, **params):
    response = head.client.get("/v1/usage", params=params, headers=head.auth(token))
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def priced(tmp_path, clock, start_head):
    with start_head(tmp_path / "home", clock, gpu_prices=PRICES) as head:
        yield head


def scripted(head):
    """alice (research) runs 2 H100s for 360 s; bob (infra) fails once after 100 s on an A100, then runs 200 s."""
    a = Node(head, "node-a", 4, "H100", busy_w=300.0)
    b = Node(head, "node-b", 2, "A100", busy_w=250.0)
    alice, bob = head.user_token("alice"), head.user_token("bob")
    spec = {"command": "train", "resources": {"gpus": 2, "gpu_type": "H100"}, "team": "research"}
    first = head.submit(spec, token=alice)["id"]
    second = head.submit(
        {"command": "eval", "resources": {"gpus": 1, "gpu_type": "A100"}, "team": "infra", "max_restarts": 1},
        token=bob,
    )["id"]
    assert head.cycle().placed == 2
    a.start()
    b.start()
    run_for(head, [a, b], 100)
    b.exit(second, 1)  # requeued: a second attempt
    assert head.job(second)["state"] == "PENDING"
    assert head.cycle().placed == 1
    b.start()
    run_for(head, [a, b], 200)
    b.exit(second, 0)
    run_for(head, [a], 60)
    a.exit(first, 0)
    assert head.job(first)["state"] == head.job(second)["state"] == "SUCCEEDED"
    return first, second, alice, bob


# alice: 2 GPUs x 360 s = 720 GPU-s; 0.2 GPU-h x 2.5 = 0.5; 2 x 300 W x 360 s = 216 kJ = 0.06 kWh.
# bob: 1 GPU x (100 + 200) s = 300 GPU-s; x 1.2 / 3600 = 0.1; 250 W x 300 s = 75 kJ.
ALICE = {"gpu_seconds": 720.0, "cost": 0.5, "energy_kwh": 0.06}
BOB = {"gpu_seconds": 300.0, "cost": 0.1, "energy_kwh": round(75_000 / 3_600_000, 6)}


def figures(row):
    return {k: row[k] for k in ("gpu_seconds", "cost", "energy_kwh")}


def test_exact_usage_per_job_user_team_and_gpu_type(priced):
    first, second, _, _ = scripted(priced)
    assert priced.job(first)["usage"] == ALICE
    assert priced.job(second)["usage"] == BOB  # both attempts count
    by_user = usage(priced, priced.admin_token, by="user")
    assert [(r["key"], figures(r), r["jobs"]) for r in by_user["rows"]] == [("alice", ALICE, 1), ("bob", BOB, 1)]
    assert by_user["total"]["gpu_seconds"] == 1020.0
    assert by_user["total"]["cost"] == 0.6
    assert by_user["total"]["gpu_hours"] == round(1020 / 3600, 6)
    teams = {r["key"]: figures(r) for r in usage(priced, priced.admin_token, by="team")["rows"]}
    assert teams == {"research": ALICE, "infra": BOB}
    types = {r["key"]: figures(r) for r in usage(priced, priced.admin_token, by="gpu-type")["rows"]}
    assert types == {"H100": ALICE, "A100": BOB}
    jobs = {r["key"]: figures(r) for r in usage(priced, priced.admin_token, by="job")["rows"]}
    assert jobs == {first: ALICE, second: BOB}


def test_a_period_counts_only_what_falls_in_it(priced):
    first, _, _, _ = scripted(priced)
    started = priced.job(first)["started_at"]
    half = (priced.clock.now() - timedelta(seconds=180)).isoformat()  # alice's first 180 s; bob's 100 + 80
    report = usage(priced, priced.admin_token, by="user", since=started, until=half)
    rows = {r["key"]: figures(r) for r in report["rows"]}
    assert rows["alice"] == {"gpu_seconds": 360.0, "cost": 0.25, "energy_kwh": 0.03}
    assert rows["bob"]["gpu_seconds"] == 180.0
    assert rows["bob"]["cost"] == 0.06


def test_users_see_only_their_own_usage(priced):
    _, _, alice, _ = scripted(priced)
    report = usage(priced, alice, by="team")
    assert [(r["key"], figures(r)) for r in report["rows"]] == [("research", ALICE)]


def test_a_running_job_counts_up_to_now(priced):
    a = Node(priced, "node-a", 4, "H100", busy_w=300.0)
    job = priced.submit({"command": "train", "resources": {"gpus": 4}})["id"]
    priced.cycle()
    a.start()
    run_for(priced, [a], 30)
    assert priced.job(job)["usage"] == {"gpu_seconds": 120.0, "cost": 0.083333, "energy_kwh": 0.01}
    priced.clock.advance(5)  # no reading yet: the last one holds
    assert priced.job(job)["usage"]["gpu_seconds"] == 140.0
    assert priced.job(job)["usage"]["energy_kwh"] == round(4 * 300 * 35 / 3_600_000, 6)


def test_a_period_after_now_has_no_rows_for_running_jobs(priced):
    a = Node(priced, "node-a", 4, "H100", busy_w=300.0)
    priced.submit({"command": "train", "resources": {"gpus": 4}})
    priced.cycle()
    a.start()
    run_for(priced, [a], 30)
    since, until = (priced.clock.now() + timedelta(days=d) for d in (1, 2))
    report = usage(priced, priced.admin_token, by="user", since=since.isoformat(), until=until.isoformat())
    assert report["rows"] == []
    assert (report["total"]["jobs"], report["total"]["gpu_seconds"]) == (0, 0.0)


def test_energy_is_stored_and_usage_survives_a_restart(tmp_path, clock, start_head):
    home = tmp_path / "home"
    with start_head(home, clock, gpu_prices=PRICES) as head:
        first, second, _, _ = scripted(head)
        assert meter(head.rt) == 3  # one energy row per task: alice's, bob's two attempts
        assert meter(head.rt) == 0  # nothing new to meter
        events = head.client.get("/v1/events", params={"limit": 1000}, headers=head.admin).json()
        energy = [e for e in events if e["kind"] == "usage.energy"]
        assert sorted(e["job_id"] for e in energy if e["data"]["job"] == second) == [f"{second}/0/0", f"{second}/1/0"]
        kinds = [e["kind"] for e in head.client.get("/v1/events", params={"job": second}, headers=head.admin).json()]
        assert "usage.energy" not in kinds  # a job's own events stay its state changes
    with start_head(home, clock, gpu_prices=PRICES) as head:  # readings in memory are gone
        assert head.job(first)["usage"] == ALICE
        assert head.job(second)["usage"] == BOB


def test_metering_in_steps_adds_up_to_the_whole(priced):
    a = Node(priced, "node-a", 2, "H100", busy_w=400.0)
    job = priced.submit({"command": "train", "resources": {"gpus": 2}})["id"]
    priced.cycle()
    a.start()
    for _ in range(6):
        priced.clock.advance(4)  # meter between readings
        assert meter(priced.rt) == 1
        priced.clock.advance(6)
        a.beat()
    a.exit(job, 0)
    meter(priced.rt)
    seconds = 6 * 10
    assert priced.job(job)["usage"] == {
        "gpu_seconds": 2.0 * seconds,
        "cost": round(2 * seconds / 3600 * 2.5, 6),
        "energy_kwh": round(2 * 400 * seconds / 3_600_000, 6),
    }


def refused(head, path, params):
    """The one error of a refused query: its ``loc`` and ``field``."""
    response = head.client.get(path, params=params, headers=head.admin)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    return error["loc"], error["field"]


@pytest.mark.parametrize(
    ("path", "params", "name"),
    [
        ("/v1/usage", {"since": "2025-02-01T00:00:00", "until": "2025-01-01T00:00:00"}, "since"),
        ("/v1/usage", {"by": "colour"}, "by"),
        ("/v1/usage", {"since": "9999-12-31T23:59:59-01:00"}, "since"),  # past the year 9999 in UTC
        ("/v1/usage", {"until": "9999-12-31T23:59:59-01:00"}, "until"),
        ("/v1/usage/series", {"since": "2025-01-01", "until": "2025-01-02", "step": 1}, "step"),  # too many buckets
        ("/v1/usage/series", {"since": "2025-01-01", "until": "2025-01-02", "step": "inf"}, "step"),
        ("/v1/usage/series", {"since": "2025-01-01", "until": "2025-01-02", "step": "1e300"}, "step"),
        ("/v1/usage/series", {"since": "2025-01-01", "until": "2025-01-02", "step": "nan"}, "step"),
        ("/v1/usage/series", {"since": "9999-12-31T20:00:00", "until": "9999-12-31T23:59:59", "step": 3600}, "until"),
        ("/v1/usage/series", {"since": "2025-02-01T00:00:00", "until": "2025-01-01T00:00:00"}, "since"),
    ],
)
def test_bad_periods_are_refused_naming_the_query_parameter(priced, path, params, name):
    assert refused(priced, path, params) == (["query", name], name)


def test_series_buckets_add_up_to_the_report(priced):
    scripted(priced)
    since = (priced.clock.now() - timedelta(hours=1)).isoformat()
    response = priced.client.get(
        "/v1/usage/series", params={"since": since, "step": 60, "by": "team"}, headers=priced.admin
    )
    assert response.status_code == 200, response.text
    series = response.json()
    assert series["keys"] == ["infra", "research"]
    assert len(series["buckets"]) == 60
    research = sum(b["usage"].get("research", {}).get("gpu_seconds", 0) for b in series["buckets"])
    assert research == pytest.approx(720.0)
    cost = sum(b["usage"].get("infra", {}).get("cost", 0) for b in series["buckets"])
    assert cost == pytest.approx(0.1, abs=1e-5)


def test_the_meter_loop_stores_energy_once_more_when_the_head_stops(priced):
    import asyncio

    from corral.head.loops import meter_loop

    first, *_ = scripted(priced)

    async def start_then_stop():
        task = asyncio.create_task(meter_loop(priced.rt))
        await asyncio.sleep(0.05)  # well before the first interval
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(start_then_stop())
    events = priced.client.get("/v1/events", params={"limit": 1000}, headers=priced.admin).json()
    stored = [e for e in events if e["kind"] == "usage.energy" and e["data"]["job"] == first]
    assert [round(e["data"]["joules"]) for e in stored] == [216_000]


def run_one_job(head, node_name, seconds):
    """A 2-GPU H100 job on a new node of its own, run to success for ``seconds``; its id."""
    node = Node(head, node_name, 2, "H100", busy_w=300.0)
    job = head.submit({"command": "train", "resources": {"gpus": 2}})["id"]
    head.cycle()
    node.start()
    run_for(head, [node], seconds)
    node.exit(job, 0)
    return job


def test_cost_stays_at_the_prices_in_force_when_the_gpus_were_held(tmp_path, clock, start_head):
    home = tmp_path / "home"
    with start_head(home, clock, gpu_prices=PRICES) as head:
        before = run_one_job(head, "node-a", 360)
        assert head.job(before)["usage"]["cost"] == 0.5  # 0.2 GPU-hours at 2.5
    clock.advance(600)
    with start_head(home, clock, gpu_prices={"H100": 10.0}) as head:  # the price quadruples from now
        assert head.job(before)["usage"]["cost"] == 0.5  # what was held before keeps its price
        after = run_one_job(head, "node-b", 360)
        assert head.job(after)["usage"]["cost"] == 2.0  # 0.2 GPU-hours at 10
        total = usage(head, head.admin_token, by="gpu-type")["total"]
        assert (total["gpu_seconds"], total["cost"]) == (1440.0, 2.5)
    with start_head(home, clock, gpu_prices={"H100": 10.0}) as head:  # the same prices: nothing changes
        assert (head.job(before)["usage"]["cost"], head.job(after)["usage"]["cost"]) == (0.5, 2.0)


def test_a_hold_keeps_the_gpu_type_it_ran_on_when_the_node_changes_its_gpus(priced):
    job = run_one_job(priced, "node-a", 360)
    held = {"gpu_seconds": 720.0, "cost": 0.5}  # 0.2 GPU-hours of H100 at 2.5
    priced.register("node-a", gpus=2, gpu_type="A100")  # the same node comes back with other GPUs
    assert {k: priced.job(job)["usage"][k] for k in held} == held
    types = {r["key"]: {k: r[k] for k in held} for r in usage(priced, priced.admin_token, by="gpu-type")["rows"]}
    assert types == {"H100": held}


def test_a_price_matches_gpu_types_exactly_and_one_in_another_case_is_logged(tmp_path, clock, start_head, caplog):
    """As a job's gpu_type: ``h100`` is not the nodes' ``H100`` (the head says so when it starts)."""
    home = tmp_path / "home"
    with start_head(home, clock, gpu_prices={"h100": 2.5, "A100": 1.2}) as head:
        job = run_one_job(head, "node-a", 360)
        assert head.job(job)["usage"]["cost"] == 0.0  # 0.2 GPU-hours of H100, which has no price
    caplog.set_level("WARNING", logger="corral.head.services.accounting.prices")
    with start_head(home, clock, gpu_prices={"h100": 2.5, "A100": 1.2}) as head:
        assert head.job(job)["usage"]["cost"] == 0.0
    [warned] = [r.getMessage() for r in caplog.records if r.name.endswith("accounting.prices")]
    assert warned.startswith("--gpu-prices prices h100, but the nodes' GPUs are H100: GPU types match exactly")
