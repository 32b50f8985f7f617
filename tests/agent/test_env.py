"""The environment of a task's processes."""

from corral.agent.env import process_env
from corral.api import DesiredTask


def desired(**overrides) -> DesiredTask:
    fields = {
        "task_id": "j-1/0/1",
        "job_id": "j-1",
        "generation": 0,
        "node_rank": 1,
        "command": "true",
        "launcher": "per-gpu",
        "gpus": [2, 5],
        "env": {"WORLD_SIZE": "4", "NODE_RANK": "1", "MY_VAR": "x"},
        "rank_offset": 2,
        "processes": 2,
        "checkpoint_dir": "/ckpt/j-1",
        "grace_s": 10.0,
    }
    return DesiredTask(**{**fields, **overrides})


def test_rank_and_gpu_variables():
    env = process_env(desired(), 1, "n2", "/tasks/x", "n2:j-1/0/1", base={"PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "2,5"
    assert env["RANK"] == "3"
    assert env["LOCAL_RANK"] == "1"
    assert env["WORLD_SIZE"] == "4"
    assert env["MY_VAR"] == "x"
    assert env["CORRAL_NODE"] == "n2"
    assert env["CORRAL_TASK_MARKER"] == "n2:j-1/0/1"
    assert env["PATH"] == "/bin"


def test_cpu_only_tasks_see_no_gpu():
    env = process_env(desired(gpus=[], processes=1, rank_offset=1), 0, "n2", "/t", "m", base={})
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_the_agent_token_does_not_leak_into_jobs():
    env = process_env(desired(), 0, "n2", "/t", "m", base={"CORRAL_TOKEN": "secret", "HOME": "/root"})
    assert "CORRAL_TOKEN" not in env
    assert env["HOME"] == "/root"


def test_the_job_cannot_override_the_gpus_it_was_given():
    env = process_env(desired(env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}), 0, "n2", "/t", "m", base={})
    assert env["CUDA_VISIBLE_DEVICES"] == "2,5"


def test_the_hostfile_lists_every_node_with_its_slots():
    from corral.agent.env import hostfile_text
    from corral.api import HostSlots

    task = desired(hosts=[HostSlots(addr="10.0.0.1", slots=2), HostSlots(addr="10.0.0.2", slots=2)])
    assert hostfile_text(task) == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    env = process_env(task, 0, "n2", "/tasks/x", "m", base={})
    assert env["CORRAL_HOSTFILE"] == "/tasks/x/hostfile"
