"""Jobs with a container image: refused at submit where no node can run one, handed out with it otherwise."""

from corral.head.store.tables import NodeRow
from corral.model import NodeState
from corral.sched import NO_CONTAINER_RUNTIME


def submit_status(head, spec):
    response = head.client.post("/v1/jobs", json=spec, headers=head.admin)
    return response.status_code, response.json()


def test_an_image_job_is_refused_when_no_node_has_a_container_runtime(head):
    head.register("n1")
    status, body = submit_status(head, {"command": "x", "image": "busybox"})
    assert status == 422
    detail = body["detail"][0]
    assert (detail["field"], detail["type"]) == ("image", "infeasible")
    assert detail["msg"] == NO_CONTAINER_RUNTIME
    assert "an agent uses docker, podman, apptainer or enroot where it finds one" in detail["msg"]
    assert "--runtime" in detail["msg"]


def test_a_batch_names_the_image_job_it_refuses(head):
    head.register("n1")
    response = head.client.post(
        "/v1/jobs/batch", json={"jobs": [{"command": "x"}, {"command": "y", "image": "busybox"}]}, headers=head.admin
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "jobs[1].image"


def test_a_runtime_only_on_a_lost_node_does_not_count(head):
    head.register("gone", container_runtime="podman")
    head.register("n1")
    with head.rt.write() as session:
        session.get(NodeRow, "gone").state = NodeState.NOT_READY.value
    status, body = submit_status(head, {"command": "x", "image": "busybox"})
    assert status == 422
    assert body["detail"][0]["field"] == "image"


def test_an_image_job_runs_on_the_node_with_a_runtime_and_the_agent_gets_image_and_volumes(head):
    head.register("bare", gpus=2)  # the tighter fit: only the runtime filter keeps the job off it
    boxed = head.register("boxed", gpus=8, container_runtime="podman")
    job = head.submit({"command": "x", "image": "busybox", "volumes": ["/data:/data:ro"], "resources": {"gpus": 1}})
    head.cycle()
    assert [a["node"] for a in head.job(job["id"])["allocation"]] == ["boxed"]
    (task,) = boxed.tasks()
    assert (task["image"], task["volumes"]) == ("busybox", ["/data:/data:ro"])
    shown = head.job(job["id"])
    assert (shown["image"], shown["volumes"]) == ("busybox", ["/data:/data:ro"])
    assert head.nodes()["boxed"]["container_runtime"] == "podman"
    assert head.nodes()["bare"]["container_runtime"] == ""


def test_a_job_without_an_image_gets_no_container(head):
    agent = head.register("n1")
    head.submit({"command": "x"})
    head.cycle()
    (task,) = agent.tasks()
    assert (task["image"], task["volumes"]) == (None, [])
    assert (head.job(task["job_id"])["image"], head.job(task["job_id"])["volumes"]) == (None, [])


def test_volumes_without_an_image_are_refused_naming_volumes(head):
    status, body = submit_status(head, {"command": "x", "volumes": ["/data:/data"]})
    assert status == 422
    assert body["detail"][0]["field"] == "volumes"


SERVICE = {"name": "web", "command": "httpd -f -p $PORT", "image": "busybox", "replicas": {"min": 1, "max": 1}}


def create_service(head, spec):
    return head.client.post("/v1/services", json=spec, headers=head.admin)


def test_a_service_in_an_image_is_refused_where_no_node_has_a_runtime(head):
    head.register("n1")
    response = create_service(head, SERVICE)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert (detail["field"], detail["msg"]) == ("image", NO_CONTAINER_RUNTIME)


def test_a_service_counts_a_runtime_only_on_a_lost_node_as_a_job_does(head):
    head.register("gone", container_runtime="podman")
    head.register("n1")
    with head.rt.write() as session:
        session.get(NodeRow, "gone").state = NodeState.NOT_READY.value
    response = create_service(head, SERVICE)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert (detail["field"], detail["msg"]) == ("image", NO_CONTAINER_RUNTIME)


def test_a_new_image_or_new_volumes_roll_a_service_over(head):
    head.register("n1", container_runtime="docker")
    assert create_service(head, SERVICE).json()["revision"] == 1
    updated = create_service(head, {**SERVICE, "image": "busybox:1.37"})
    assert updated.status_code == 200
    assert updated.json()["revision"] == 2
    remounted = create_service(head, {**SERVICE, "image": "busybox:1.37", "volumes": ["/srv:/www:ro"]})
    assert remounted.json()["revision"] == 3
