"""GET /v1/jobs/{id}/why: a pending job's reason and every node's verdict."""

from __future__ import annotations


def test_why_groups_nodes_by_the_check_they_fail(head):
    n1 = head.register("n1", gpus=8)
    head.register("n2", gpus=8, gpu_type="A100")
    head.register("n3", gpus=4)
    busy = head.submit({"command": "a", "resources": {"gpus": 6, "gpu_type": "H100"}})["id"]
    head.cycle()
    n1.run_all()
    job = head.submit({"command": "b", "resources": {"gpus": 6, "gpu_type": "H100"}})["id"]
    head.cycle()

    response = head.client.get(f"/v1/jobs/{job}/why", headers=head.admin)
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["job_id"] == job and out["state"] == "PENDING" and out["nodes_needed"] == 1
    assert out["reason"].startswith("waiting for 1 node with 6 free H100 GPUs")
    assert [(g["filter"], g["message"], g["nodes"]) for g in out["groups"]] == [
        ("gpu_type", "has no H100 GPUs (has 8 A100)", ["n2"]),
        ("capacity", "needs 6 GPUs per node; it has 4 H100", ["n3"]),
        ("free", "needs 6 free H100 GPUs; 2 free now", ["n1"]),
    ]
    assert busy != job


def test_why_hides_other_users_jobs(head):
    head.register("n1", gpus=8)
    job = head.submit({"command": "a"}, token=head.user_token("bob"))["id"]
    response = head.client.get(f"/v1/jobs/{job}/why", headers=head.auth(head.user_token("alice")))
    assert response.status_code == 404
