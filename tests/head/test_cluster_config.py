"""The cluster config in the head: priority classes, queues, teams, quotas, fair share, reloading."""

from __future__ import annotations

import os
import textwrap

import pytest

CONFIG = """
teams:
  vision: {members: [alice], quotas: {H100: {nominal: 8}}}
  nlp: {members: [bob], quotas: {H100: {nominal: 8, borrowing_limit: 8}}}
priority_classes:
  urgent: {value: 100}
  batch: {value: 0, preemptible: true}
default_priority_class: batch
queues:
  short: {time_limit: 1h, priority_class: urgent}
"""


@pytest.fixture
def configured(tmp_path, clock, start_head):
    path = tmp_path / "corral.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    with start_head(tmp_path / "home", clock, config_path=path) as head:
        head.config_path = path
        yield head


def submit_as(head, user, spec):
    tokens = head.__dict__.setdefault("tokens", {})
    if user not in tokens:
        tokens[user] = head.user_token(user)
    return head.submit(spec, token=tokens[user])


def test_priority_classes_queues_and_teams_fill_in_the_job(configured):
    head = configured
    job = submit_as(head, "alice", {"command": "x", "resources": {"gpus": 1}})
    assert (job["team"], job["priority"], job["preemptible"]) == ("vision", 0, True)  # default class: batch
    job = submit_as(head, "bob", {"command": "x", "queue": "short"})
    assert (job["team"], job["priority"], job["preemptible"], job["time_limit_s"]) == ("nlp", 100, False, 3600.0)
    job = submit_as(head, "carol", {"command": "x", "priority_class": "urgent"})
    assert (job["team"], job["priority"]) == ("default", 100)
    job = submit_as(head, "carol", {"command": "x", "priority": 100, "queue": "short"})  # the class's own value
    assert (job["priority"], job["preemptible"]) == (100, False)
    job = submit_as(head, "carol", {"command": "x", "priority_class": "urgent", "preemptible": True})  # volunteers
    assert (job["priority"], job["preemptible"]) == (100, True)


@pytest.mark.parametrize(
    ("field", "spec", "message"),
    [
        ("priority_class", {"priority_class": "vip"}, "unknown priority class 'vip' (classes: batch, urgent)"),
        ("queue", {"queue": "long"}, "unknown queue 'long' (queues: short)"),
        (
            "priority",
            {"priority_class": "urgent", "priority": 5},
            "priority 5 differs from priority_class urgent's value 100: give one of them",
        ),
        (
            "priority",
            {"priority": 5},
            "priority 5 differs from the value 0 of priority class batch, which this job gets from the cluster's"
            " default_priority_class: leave priority out, or give priority_class: NAME instead"
            " (classes: batch (0), urgent (100))",
        ),
        (
            "priority",
            {"priority": 5, "queue": "short"},
            "priority 5 differs from the value 100 of priority class urgent, which this job gets from queue short:"
            " leave priority out, or give priority_class: NAME instead (classes: batch (0), urgent (100))",
        ),
        (
            "preemptible",
            {"preemptible": False},
            "this job's priority class 'batch' is preemptible; for a job that may not be preempted,"
            " give a priority_class that is not (classes that are not: urgent)",
        ),
    ],
)
def test_unknown_classes_and_queues_are_refused_naming_the_field(configured, field, spec, message):
    response = configured.client.post("/v1/jobs", json={"command": "x", **spec}, headers=configured.admin)
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert (detail["field"], detail["msg"]) == (field, message)


def test_a_borrowing_team_is_preempted_when_the_owner_needs_its_quota(configured):
    head = configured
    n1, n2 = head.register("n1", gpus=8), head.register("n2", gpus=8)
    borrower = submit_as(
        head, "bob", {"command": "x", "nodes": 2, "resources": {"gpus": 8}, "priority_class": "urgent"}
    )
    assert head.cycle().placed == 1  # nlp borrows vision's idle 8 H100
    for agent in (n1, n2):
        agent.run_all()
    owner = submit_as(head, "alice", {"command": "y", "resources": {"gpus": 8}})
    assert head.cycle().placed == 0
    job = head.job(borrower["id"])
    assert job["state"] == "PENDING"  # not preemptible, high priority: reclaimed all the same
    assert job["reason"] == f"preempted by job {owner['id']} (reclaiming team vision's quota from team nlp)"
    assert job["preemptions"] == 1


def test_a_team_past_its_borrowing_limit_waits_with_a_quota_reason(configured):
    head = configured
    head.register("n1", gpus=8)
    head.register("n2", gpus=8)
    head.register("n3", gpus=8)
    job = submit_as(head, "bob", {"command": "x", "nodes": 3, "resources": {"gpus": 8}})
    assert head.cycle().placed == 0
    assert head.job(job["id"])["reason"].startswith(
        "over quota: team nlp uses 0 of its 8 H100; the job asks 24, more than the team may ever hold (16: its"
        " quota of 8 and borrowing limit of 8): ask for fewer GPUs or a larger quota"
    )


def test_fair_share_favours_the_team_that_used_less(configured):
    head = configured
    n1 = head.register("n1", gpus=8)
    first = submit_as(head, "alice", {"command": "x", "resources": {"gpus": 8}})
    head.cycle()
    n1.run_all()
    head.clock.advance(3600)
    [task] = n1.tasks()
    n1.beat([head.exited(task, 0)])
    head.rt.fair_share_cache = None
    vision = submit_as(head, "alice", {"command": "again", "resources": {"gpus": 8}})
    nlp = submit_as(head, "bob", {"command": "fresh", "resources": {"gpus": 8}})
    assert head.cycle().placed == 1
    assert nlp["id"] in {t["job_id"] for t in n1.tasks()}  # submitted later, but nlp has used nothing
    assert head.job(vision["id"])["state"] == "PENDING"
    assert first["id"] != vision["id"]


def test_a_bad_config_file_is_refused_on_reload_and_the_old_one_stays(configured):
    head = configured
    head.config_path.write_text("teams:\n  vision: {parent: nowhere}\n")
    response = head.client.post("/v1/config/reload", headers=head.admin)
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert detail["field"] == "teams.vision.parent"
    assert "unknown team 'nowhere'" in detail["msg"]
    shown = head.client.get("/v1/config", headers=head.admin).json()
    assert shown["config"]["teams"]["vision"]["members"] == ["alice"]
    assert "teams.vision.parent: unknown team 'nowhere'" in shown["problem"]  # said beside the config in force
    assert head.client.post("/v1/config/reload", headers=head.auth(head.user_token("dave"))).status_code == 403


def test_a_changed_file_that_does_not_validate_is_reported_until_a_good_one_comes(configured):
    head = configured
    assert head.client.get("/v1/config", headers=head.admin).json()["problem"] is None
    for text, bumped in (("teams:\n  vision: {parent: nowhere}\n", 5), ("teams:\n  vision: {members: [carol]}\n", 10)):
        head.config_path.write_text(text)
        stat = head.config_path.stat()
        os.utime(head.config_path, (stat.st_atime, stat.st_mtime + bumped))
        head.cycle()  # the scheduling loop notices the change
        shown = head.client.get("/v1/config", headers=head.admin).json()
        if bumped == 5:
            assert shown["problem"] and shown["config"]["teams"]["vision"]["members"] == ["alice"]
    assert shown["problem"] is None and shown["config"]["teams"]["vision"]["members"] == ["carol"]


def test_a_changed_config_file_is_picked_up_by_the_next_cycle(configured):
    head = configured
    head.config_path.write_text("teams:\n  vision: {members: [alice, carol]}\n")
    stat = head.config_path.stat()
    os.utime(head.config_path, (stat.st_atime, stat.st_mtime + 5))
    head.cycle()
    assert head.client.get("/v1/config", headers=head.admin).json()["config"]["teams"]["vision"]["members"] == [
        "alice",
        "carol",
    ]
    job = submit_as(head, "carol", {"command": "x"})
    assert job["team"] == "vision"


def test_a_gpu_speed_table_makes_a_job_wait_for_the_faster_type(tmp_path, clock, start_head):
    path = tmp_path / "corral.yaml"
    path.write_text("gpu_speed: {H100: 1.0, L4: 0.2}\n")
    with start_head(tmp_path / "home", clock, config_path=path) as head:
        h100 = head.register("h", gpus=8)
        head.register("l", gpus=8, gpu_type="L4")
        head.submit({"command": "a", "resources": {"gpus": 8, "gpu_type": "H100"}, "time_limit": "10m"})
        head.cycle()
        h100.run_all()
        job = head.submit({"command": "b", "resources": {"gpus": 8, "gpu_type": ["H100", "L4"]}, "time_limit": "1h"})
        assert head.cycle().placed == 0
        assert head.job(job["id"])["reason"].startswith("waiting for H100 GPUs, expected to free up at")


TREE = """
organisation: acme
teams:
  research: {quotas: {H100: {nominal: 8, borrowing_limit: 4}}}
  nlp: {parent: research, members: [bob], quotas: {H100: {nominal: 8}}}
  infra: {members: [alice], quotas: {H100: {nominal: 16}}}
"""


def test_a_parent_teams_borrowing_limit_caps_its_teams_and_bad_sums_are_refused(tmp_path, clock, start_head):
    path = tmp_path / "corral.yaml"
    path.write_text(textwrap.dedent(TREE))
    with start_head(tmp_path / "home", clock, config_path=path) as head:
        for name in ("n1", "n2", "n3"):
            head.register(name, gpus=8)
        job = submit_as(head, "bob", {"command": "x", "nodes": 2, "resources": {"gpus": 8}})
        assert head.cycle().placed == 0  # infra's 16 are idle, but research may borrow only 4 of them
        assert head.job(job["id"])["reason"].startswith(
            "over quota: team nlp uses 0 of its 8 H100;"
            " 16 more would borrow beyond team research's borrowing limit of 4"
        )
        path.write_text(textwrap.dedent(TREE).replace("nominal: 8}}}\n  infra", "nominal: 12}}}\n  infra"))
        response = head.client.post("/v1/config/reload", headers=head.admin)
        assert response.status_code == 422
        [detail] = response.json()["detail"]
        assert detail["field"] == "teams.research.quotas.H100.nominal"
        assert detail["msg"] == "must hold its child teams' nominal quotas (nlp 12 = 12), got 8"
        teams = head.client.get("/v1/config", headers=head.admin).json()["config"]["teams"]
        assert teams["nlp"]["quotas"]["H100"]["nominal"] == 8


@pytest.mark.parametrize("text", ["", "# teams moved to another file\n\n"])
def test_an_empty_config_file_is_refused_on_reload_and_the_teams_stay(configured, text):
    head = configured
    head.config_path.write_text(text)
    response = head.client.post("/v1/config/reload", headers=head.admin)
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert detail["msg"].startswith(f"the config file {head.config_path} is empty")
    assert "`{}` to clear them on purpose" in detail["msg"]
    stat = head.config_path.stat()
    os.utime(head.config_path, (stat.st_atime, stat.st_mtime + 5))
    head.cycle()  # the change the scheduling loop notices is refused the same way
    teams = head.client.get("/v1/config", headers=head.admin).json()["config"]["teams"]
    assert sorted(teams) == ["nlp", "vision"]
    assert submit_as(head, "alice", {"command": "x"})["team"] == "vision"


def test_an_empty_mapping_clears_the_config_on_purpose(configured):
    head = configured
    head.config_path.write_text("{}\n")
    response = head.client.post("/v1/config/reload", headers=head.admin)
    assert response.status_code == 200, response.text
    assert response.json()["config"]["teams"] == {}


def test_an_empty_config_file_at_start_is_an_empty_config(tmp_path, clock, start_head):
    path = tmp_path / "corral.yaml"
    path.write_text("# no teams yet\n")
    with start_head(tmp_path / "home", clock, config_path=path) as head:
        out = head.client.get("/v1/config", headers=head.admin).json()
        assert (out["path"], out["config"]["teams"]) == (str(path), {})


def registered(head, name, teams=None):
    body = {"name": name, **({"teams": teams} if teams else {})}
    assert head.client.post("/v1/users", json=body, headers=head.admin).status_code in (200, 201)
    response = head.client.post("/v1/tokens", json={"user": name}, headers=head.admin)
    assert response.status_code == 201, response.text
    return head.auth(response.json()["token"])


def test_a_user_added_without_a_team_is_charged_to_the_config_team_listing_them(configured):
    head = configured
    alice = registered(head, "alice")  # `corral user add alice`: teams [default]
    assert head.client.get("/v1/whoami", headers=alice).json()["teams"] == ["vision", "default"]
    response = head.client.post("/v1/jobs", json={"command": "x"}, headers=alice)
    assert response.status_code == 201, response.text
    assert response.json()["team"] == "vision"
    response = head.client.post("/v1/jobs", json={"command": "x", "team": "default"}, headers=alice)
    assert response.json()["team"] == "default"  # still a member of default
    carol = registered(head, "carol")  # in no team of the config
    assert head.client.post("/v1/jobs", json={"command": "x"}, headers=carol).json()["team"] == "default"
    bob = registered(head, "bob", teams=["vision"])  # teams given explicitly come first; nlp (config) last
    assert head.client.get("/v1/whoami", headers=bob).json()["teams"] == ["vision", "nlp"]
    assert head.client.post("/v1/jobs", json={"command": "x"}, headers=bob).json()["team"] == "vision"
    assert head.client.post("/v1/jobs", json={"command": "x", "team": "nlp"}, headers=bob).json()["team"] == "nlp"


def test_user_add_and_list_report_the_teams_whoami_shows(configured):
    head = configured
    added = head.client.post("/v1/users", json={"name": "bob"}, headers=head.admin)
    assert added.status_code == 201, added.text
    assert added.json()["teams"] == ["nlp", "default"]  # listed under nlp's members in the config
    bob = registered(head, "bob")
    assert head.client.get("/v1/whoami", headers=bob).json()["teams"] == ["nlp", "default"]
    registered(head, "alice", teams=["nlp"])
    registered(head, "carol")
    listed = {u["name"]: u["teams"] for u in head.client.get("/v1/users", headers=head.admin).json()}
    first = head.client.get("/v1/whoami", headers=head.admin).json()  # the first admin, never added
    assert first["teams"] == ["default"]
    expected = {"alice": ["nlp", "vision"], "bob": ["nlp", "default"], "carol": ["default"], first["user"]: ["default"]}
    assert listed == expected


def test_reloading_a_head_started_without_a_config_file_says_there_is_none(head):
    response = head.client.post("/v1/config/reload", headers=head.admin)
    assert response.status_code == 409
    assert "started without --config" in response.json()["detail"]


@pytest.mark.parametrize(
    ("teams", "message"),
    [
        (["nosuch"], "'nosuch' is not a team of the cluster config (teams: nlp, vision, or default)"),
        (["vision", "org"], "'org' is the organisation, not a team (teams: nlp, vision, or default)"),
    ],
)
def test_a_user_is_added_only_to_teams_the_config_has(configured, teams, message):
    response = configured.client.post("/v1/users", json={"name": "frank", "teams": teams}, headers=configured.admin)
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert detail["field"].startswith("teams[") and detail["msg"] == message
    ok = configured.client.post(
        "/v1/users", json={"name": "frank", "teams": ["vision", "default"]}, headers=configured.admin
    )
    assert ok.status_code == 201, ok.text


def test_a_job_for_a_team_the_config_does_not_have_is_refused_even_from_an_admin(configured):
    response = configured.client.post("/v1/jobs", json={"command": "x", "team": "visoin"}, headers=configured.admin)
    assert response.status_code == 422
    [detail] = response.json()["detail"]
    assert (detail["field"], detail["msg"]) == (
        "team",
        "'visoin' is not a team of the cluster config (teams: nlp, vision, or default)",
    )
