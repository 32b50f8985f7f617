"""A task's rank as a container: names, mounts, the variables that go in, and a node without a runtime."""

import pytest

from corral.agent.containers.oci import Podman
from corral.agent.containers.rank import container_name, container_names, container_run
from corral.agent.launch import LaunchError
from corral.api import DesiredTask


def desired(tmp_path, **overrides) -> DesiredTask:
    fields = {
        "task_id": "j-1/3/1",
        "job_id": "j-1",
        "generation": 3,
        "node_rank": 1,
        "command": "python train.py",
        "launcher": "per-gpu",
        "gpus": [2, 5],
        "env": {"WORLD_SIZE": "4"},
        "rank_offset": 2,
        "processes": 2,
        "checkpoint_dir": str(tmp_path / "ckpt"),
        "grace_s": 10.0,
        "image": "reg.io/train:1",
        "volumes": ["/data:/data:ro"],
    }
    return DesiredTask(**{**fields, **overrides})


JOB_ENV = {"RANK": "2", "CORRAL_TASK_MARKER": "n2:j-1/3/1", "CORRAL_TASK_DIR": "/t"}


def mounts(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "-v"]


def test_every_rank_of_every_attempt_has_its_own_container(tmp_path):
    task = desired(tmp_path)
    assert container_name(task, 2) == "corral-j-1-3-1-r2"
    assert container_names(task) == ["corral-j-1-3-1-r2", "corral-j-1-3-1-r3"]


def test_the_workdir_task_dir_and_checkpoint_dir_are_mounted_at_their_own_paths(tmp_path):
    (tmp_path / "ckpt").mkdir()
    work, task_dir = tmp_path / "work", tmp_path / "task"
    run = container_run(Podman(), desired(tmp_path), 2, JOB_ENV, work, task_dir, False, "n2")
    assert mounts(run.argv) == [
        f"{work}:{work}",
        f"{task_dir}:{task_dir}:rw",
        f"{tmp_path / 'ckpt'}:{tmp_path / 'ckpt'}:rw",
        "/data:/data:ro",
    ]
    assert "corral.node=n2" in run.argv


def test_the_task_dir_is_not_mounted_twice_when_it_is_the_workdir(tmp_path):
    task_dir = tmp_path / "task"
    run = container_run(Podman(), desired(tmp_path), 2, JOB_ENV, task_dir, task_dir, False, "n2")
    assert mounts(run.argv) == [f"{task_dir}:{task_dir}", "/data:/data:ro"]  # no checkpoint dir yet either


def test_a_volume_of_the_job_wins_over_a_directory_of_corral_at_the_same_path(tmp_path):
    task_dir = tmp_path / "task"
    task = desired(tmp_path, volumes=[f"/elsewhere:{task_dir}"])
    run = container_run(Podman(), task, 2, JOB_ENV, tmp_path / "work", task_dir, False, "n2")
    assert mounts(run.argv)[1:] == [f"/elsewhere:{task_dir}:rw"]


def test_the_agents_marker_stays_outside_the_container(tmp_path):
    run = container_run(Podman(), desired(tmp_path), 2, JOB_ENV, tmp_path, tmp_path, False, "n2")
    assert "CORRAL_TASK_MARKER" not in run.env
    assert run.env["RANK"] == "2"
    assert run.env["CORRAL_TASK_DIR"] == "/t"


def test_real_gpus_reach_the_runtime(tmp_path):
    env = {**JOB_ENV, "CUDA_VISIBLE_DEVICES": "2,5"}
    run = container_run(Podman(), desired(tmp_path), 2, env, tmp_path, tmp_path, True, "n2")
    assert "nvidia.com/gpu=5" in run.argv
    assert run.env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_node_without_a_runtime_cannot_start_an_image(tmp_path):
    with pytest.raises(LaunchError, match=r"runs in image reg.io/train:1 but this agent has no container runtime"):
        container_run(None, desired(tmp_path), 2, JOB_ENV, tmp_path, tmp_path, False, "n2")
