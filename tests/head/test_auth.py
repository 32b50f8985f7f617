"""Users, tokens and teams: who may add users, make and revoke tokens, and submit to which team."""

from corral.head.security import hash_token
from corral.head.store.tables import TokenRow


def add_user(head, name, role="user", teams=None, token=None):
    body = {"name": name, "role": role, **({"teams": teams} if teams else {})}
    return head.client.post("/v1/users", json=body, headers=head.auth(token or head.admin_token))


def new_token(head, token, user=None, name=""):
    response = head.client.post("/v1/tokens", json={"user": user, "name": name}, headers=head.auth(token))
    return response


def token_for(head, user, role="user", teams=None):
    assert add_user(head, user, role, teams).status_code in (200, 201)
    response = new_token(head, head.admin_token, user=user, name=f"{user}'s laptop")
    assert response.status_code == 201, response.text
    return response.json()["token"]


def test_an_admin_adds_users_and_lists_them(head):
    response = add_user(head, "alice", teams=["vision", "nlp"])
    assert response.status_code == 201, response.text
    assert response.json()["teams"] == ["vision", "nlp"]
    assert add_user(head, "bob").json()["teams"] == ["default"]
    users = head.client.get("/v1/users", headers=head.admin).json()
    first = head.client.get("/v1/whoami", headers=head.admin).json()["user"]  # the first admin: a token, no record
    assert [(u["name"], u["role"], u["teams"]) for u in users] == sorted(
        [("alice", "user", ["vision", "nlp"]), ("bob", "user", ["default"]), (first, "admin", ["default"])]
    )
    whoami = head.client.get("/v1/whoami", headers=head.admin).json()
    assert next(u["teams"] for u in users if u["name"] == first) == whoami["teams"]  # as whoami shows them


def test_adding_an_existing_user_changes_their_role_and_teams(head):
    add_user(head, "alice", teams=["vision"])
    response = add_user(head, "alice", role="admin", teams=["nlp"])
    assert response.status_code == 200
    assert (response.json()["role"], response.json()["teams"]) == ("admin", ["nlp"])


def test_what_a_change_leaves_out_stays_as_it_is(head):
    add_user(head, "alice", role="admin", teams=["vision"])
    kept = head.client.post("/v1/users", json={"name": "alice", "teams": ["nlp"]}, headers=head.admin).json()
    assert (kept["role"], kept["teams"]) == ("admin", ["nlp"])
    kept = head.client.post("/v1/users", json={"name": "alice", "role": "user"}, headers=head.admin).json()
    assert (kept["role"], kept["teams"]) == ("user", ["nlp"])
    new = head.client.post("/v1/users", json={"name": "dave"}, headers=head.admin).json()
    assert (new["role"], new["teams"]) == ("user", ["default"])


def test_the_first_admin_given_teams_stays_admin(head):
    first = head.client.get("/v1/whoami", headers=head.admin).json()["user"]
    response = head.client.post("/v1/users", json={"name": first, "teams": ["ops"]}, headers=head.admin)
    assert response.status_code == 201, response.text
    assert (response.json()["role"], response.json()["teams"]) == ("admin", ["ops"])
    assert head.client.get("/v1/users", headers=head.admin).status_code == 200


def test_the_last_admin_cannot_be_demoted_until_another_admin_has_a_token(head):
    first = head.client.get("/v1/whoami", headers=head.admin).json()["user"]
    response = add_user(head, first, role="user")
    assert response.status_code == 409
    assert "last admin" in response.json()["detail"] and "corral token create" in response.json()["detail"]
    assert head.client.get("/v1/users", headers=head.admin).status_code == 200  # still admin, at once
    add_user(head, "carol", role="admin")  # an admin without a token cannot act yet
    assert add_user(head, first, role="user").status_code == 409
    carol = new_token(head, head.admin_token, user="carol").json()["token"]
    assert add_user(head, first, role="user").status_code == 201
    assert head.client.get("/v1/users", headers=head.admin).status_code == 403  # demoted at once
    assert add_user(head, "carol", role="user", token=carol).status_code == 409  # now carol is the last


def test_the_last_admin_token_cannot_be_revoked(head):
    mine = next(t["id"] for t in head.client.get("/v1/tokens", headers=head.admin).json() if t["role"] == "admin")
    response = head.client.delete(f"/v1/tokens/{mine}", headers=head.admin)
    assert response.status_code == 409 and "last admin" in response.json()["detail"]
    assert head.client.get("/v1/users", headers=head.admin).status_code == 200
    spare = new_token(head, head.admin_token, name="spare").json()
    assert head.client.delete(f"/v1/tokens/{mine}", headers=head.admin).status_code == 200
    assert head.client.get("/v1/users", headers=head.auth(spare["token"])).status_code == 200


def test_a_new_admin_token_at_start_gives_the_heads_user_admin_back(head):
    from corral.head.services.auth import bootstrap
    from corral.head.store.tables import UserRow

    first = head.client.get("/v1/whoami", headers=head.admin).json()["user"]
    add_user(head, "carol", role="admin")
    new_token(head, head.admin_token, user="carol")
    assert add_user(head, first, role="user").status_code == 201
    (head.home / "client.json").unlink()  # the admin token's only copy is lost
    token, _ = bootstrap(head.rt)
    assert token != head.admin_token
    with head.rt.read() as session:
        assert session.get(UserRow, first).role == "admin"
    head.app.state.tokens.forget()
    assert head.client.get("/v1/users", headers=head.auth(token)).status_code == 200


def test_a_user_cannot_add_or_list_users(head):
    alice = token_for(head, "alice")
    assert add_user(head, "mallory", role="admin", token=alice).status_code == 403
    assert head.client.get("/v1/users", headers=head.auth(alice)).status_code == 403


def test_bad_user_names_and_teams_are_422_with_the_field(head):
    for name in ("no spaces", "agent"):
        response = add_user(head, name)
        assert response.status_code == 422
        assert response.json()["detail"][0]["field"] == "name"
    for team in ("ml@corp", "t" * 64):  # what a job could not name as its team
        response = add_user(head, "alice", teams=[team])
        assert response.status_code == 422
        assert response.json()["detail"][0]["field"] == "teams"
    response = add_user(head, "alice", teams=["ok", "ok"])
    assert response.json()["detail"][0]["field"] == "teams"
    assert "twice" in response.json()["detail"][0]["msg"]


def test_a_bad_user_name_or_token_label_is_refused_with_the_rule_in_words(head):
    refusals = [
        add_user(head, "no spaces"),
        new_token(head, head.admin_token, user="no spaces"),
        new_token(head, head.admin_token, name="tab\there"),
    ]
    said = [(r.status_code, r.json()["detail"][0]["field"], r.json()["detail"][0]["msg"]) for r in refusals]
    rule = "expected 1-64 characters: letters, digits, '_', '.', '@' and '-', starting with a letter or digit"
    assert said == [
        (422, "name", f"{rule}, got 'no spaces'"),
        (422, "user", f"{rule}, got 'no spaces'"),
        (422, "name", "expected text without control characters (such as a newline or a tab), got 'tab\\there'"),
    ]


def test_a_token_for_the_agents_name_is_refused_without_suggesting_to_add_that_user(head):
    response = new_token(head, head.admin_token, user="agent")
    assert response.status_code == 404
    said = response.json()["detail"]
    assert said == "no user 'agent': the name is kept for the agents' join token (`corral join-token`)"


def test_tokens_are_stored_only_as_hashes_and_work_at_once(head):
    token = token_for(head, "alice", teams=["vision"])
    with head.rt.read() as session:
        rows = {row.hash: row for row in session.query(TokenRow)}
    assert token not in {v for row in rows.values() for v in (row.hash, row.name)}
    assert rows[hash_token(token)].user == "alice"
    me = head.client.get("/v1/whoami", headers=head.auth(token)).json()
    assert me == {"user": "alice", "role": "user", "teams": ["vision"]}


def test_a_user_creates_their_own_token_but_not_someone_elses(head):
    alice = token_for(head, "alice")
    token_for(head, "bob")
    mine = new_token(head, alice, name="ci")
    assert mine.status_code == 201
    assert mine.json()["user"] == "alice"
    assert new_token(head, alice, user="bob").status_code == 403


def test_a_token_for_an_unknown_user_is_404_naming_the_fix(head):
    response = new_token(head, head.admin_token, user="nobody")
    assert response.status_code == 404
    assert "corral user add nobody" in response.json()["detail"]


def test_a_token_carries_its_users_role(head):
    admin2 = token_for(head, "carol", role="admin")
    assert head.client.get("/v1/users", headers=head.auth(admin2)).status_code == 200


def test_a_role_change_applies_to_the_users_existing_tokens(head):
    carol = token_for(head, "carol", role="admin")
    assert head.client.get("/v1/users", headers=head.auth(carol)).status_code == 200
    assert add_user(head, "carol", role="user").status_code == 200  # demoted
    assert head.client.get("/v1/users", headers=head.auth(carol)).status_code == 403
    assert head.client.get("/v1/whoami", headers=head.auth(carol)).json()["role"] == "user"
    listed = head.client.get("/v1/tokens", headers=head.admin).json()
    assert {t["role"] for t in listed if t["user"] == "carol"} == {"user"}
    assert add_user(head, "carol", role="admin").status_code == 200  # and back
    assert head.client.get("/v1/users", headers=head.auth(carol)).status_code == 200


def test_revoking_a_token_stops_it_at_once(head):
    alice = token_for(head, "alice")
    second = new_token(head, alice, name="spare").json()
    assert head.client.get("/v1/jobs", headers=head.auth(second["token"])).status_code == 200
    response = head.client.delete(f"/v1/tokens/{second['id']}", headers=head.auth(alice))
    assert response.status_code == 200, response.text
    assert head.client.get("/v1/jobs", headers=head.auth(second["token"])).status_code == 401
    assert head.client.get("/v1/jobs", headers=head.auth(alice)).status_code == 200


def test_a_user_cannot_see_or_revoke_another_users_tokens(head):
    alice, bob = token_for(head, "alice"), token_for(head, "bob")
    alice_ids = {t["id"] for t in head.client.get("/v1/tokens", headers=head.auth(alice)).json()}
    bob_ids = {t["id"] for t in head.client.get("/v1/tokens", headers=head.auth(bob)).json()}
    assert alice_ids and bob_ids and not alice_ids & bob_ids
    victim = next(iter(alice_ids))
    assert head.client.delete(f"/v1/tokens/{victim}", headers=head.auth(bob)).status_code == 404
    assert head.client.get("/v1/jobs", headers=head.auth(alice)).status_code == 200


def test_an_admin_sees_and_revokes_anyones_token(head):
    alice = token_for(head, "alice")
    everyone = head.client.get("/v1/tokens", headers=head.admin).json()
    assert {"alice", "agent"} <= {t["user"] for t in everyone}
    alice_id = next(t["id"] for t in everyone if t["user"] == "alice")
    assert head.client.delete(f"/v1/tokens/{alice_id}", headers=head.admin).status_code == 200
    assert head.client.get("/v1/jobs", headers=head.auth(alice)).status_code == 401


def test_the_join_token_cannot_be_revoked_as_a_user_token(head):
    join_id = next(t["id"] for t in head.client.get("/v1/tokens", headers=head.admin).json() if t["role"] == "agent")
    response = head.client.delete(f"/v1/tokens/{join_id}", headers=head.admin)
    assert response.status_code == 409
    assert "is the agents' join token: it cannot be revoked" in response.json()["detail"]
    alice = token_for(head, "alice")
    assert head.client.delete(f"/v1/tokens/{join_id}", headers=head.auth(alice)).status_code == 404


def test_a_job_goes_to_the_users_default_team(head):
    alice = token_for(head, "alice", teams=["vision", "nlp"])
    assert head.submit({"command": "x"}, token=alice)["team"] == "vision"
    assert head.submit({"command": "x", "team": "nlp"}, token=alice)["team"] == "nlp"


def test_a_job_for_a_team_the_user_is_not_in_is_403(head):
    alice = token_for(head, "alice", teams=["vision"])
    response = head.client.post("/v1/jobs", json={"command": "x", "team": "nlp"}, headers=head.auth(alice))
    assert response.status_code == 403
    assert "alice is not a member of team 'nlp'" in response.json()["detail"]
    batch = {"jobs": [{"command": "x"}, {"command": "y", "team": "nlp"}]}
    response = head.client.post("/v1/jobs/batch", json=batch, headers=head.auth(alice))
    assert response.status_code == 403
    assert response.json()["detail"].startswith("jobs[1].team")
    assert head.jobs() == []


def test_an_admin_submits_to_any_team(head):
    carol = token_for(head, "carol", role="admin", teams=["ops"])
    assert head.submit({"command": "x", "team": "nlp"}, token=carol)["team"] == "nlp"


def test_users_see_and_cancel_only_their_own_jobs(head):
    alice, bob = token_for(head, "alice"), token_for(head, "bob")
    job = head.submit({"command": "x"}, token=alice)["id"]
    assert [j["id"] for j in head.client.get("/v1/jobs", headers=head.auth(bob)).json()] == []
    assert head.client.get(f"/v1/jobs/{job}", headers=head.auth(bob)).status_code == 404
    assert head.client.post(f"/v1/jobs/{job}/cancel", headers=head.auth(bob)).status_code == 404
    assert head.client.post("/v1/jobs/cancel", json={"ids": [job]}, headers=head.auth(bob)).status_code == 404
    assert head.job(job)["state"] == "PENDING"
    assert head.client.post(f"/v1/jobs/{job}/cancel", headers=head.auth(alice)).json()["state"] == "CANCELLED"


def test_events_of_other_users_jobs_are_hidden(head):
    alice, bob = token_for(head, "alice"), token_for(head, "bob")
    job = head.submit({"command": "x"}, token=alice)["id"]
    seen = head.client.get("/v1/events", params={"limit": 1000}, headers=head.auth(bob)).json()
    assert job not in {e["job_id"] for e in seen}
    only = head.client.get("/v1/events", params={"job": job}, headers=head.auth(bob)).json()
    assert only == []
    assert job in {e["job_id"] for e in head.client.get("/v1/events", headers=head.auth(alice)).json()}


def test_the_first_admin_without_a_record_is_in_the_default_team_its_jobs_go_to(head):
    me = head.client.get("/v1/whoami", headers=head.admin).json()
    job = head.submit({"command": "x"})
    assert me["teams"] == ["default"] == [job["team"]]


def test_a_team_listed_twice_is_named(head):
    response = add_user(head, "dana", teams=["vision", "nlp", "vision"])
    assert response.status_code == 422
    assert "team 'vision' is listed twice; list each team once" in response.text
