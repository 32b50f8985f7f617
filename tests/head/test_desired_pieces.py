"""A node's desired tasks are serialised once each and kept: a later build of its desired state (the next
version, the long-poll answering the version a heartbeat just built) reads which tasks are live and
serialises only the new ones, and lists exactly what a build from scratch would."""

import threading
import time

from corral.api import DesiredState
from corral.head.services import agents as agent_service
from corral.head.services import desired as desired_module


def count_serialised(monkeypatch):
    calls = []
    original = desired_module.desired_task

    def counting(*args, **kwargs):
        calls.append(args[1].id)
        return original(*args, **kwargs)

    monkeypatch.setattr(desired_module, "desired_task", counting)
    return calls


def from_scratch(head, node):
    """The node's desired state as a head that kept nothing builds it."""
    head.rt.desired_pieces.forget(node)
    return head.agents[node].desired()


def test_each_task_is_serialised_once_across_builds_and_versions(head, monkeypatch):
    agent = head.register("n1", gpus=0)
    first = [head.submit({"command": f"echo {i}"})["id"] for i in range(3)]
    head.cycle()
    calls = count_serialised(monkeypatch)
    assert sorted(t["job_id"] for t in agent.tasks()) == sorted(first)
    assert sorted(t["job_id"] for t in agent.tasks()) == sorted(first)
    second = head.submit({"command": "echo more"})["id"]
    head.cycle()
    desired = agent.desired()
    assert sorted(t["job_id"] for t in desired["tasks"]) == sorted([*first, second])
    assert sorted(calls) == sorted(f"{j}/0/0" for j in [*first, second])
    assert desired == from_scratch(head, "n1")


def test_a_task_that_ended_is_left_out_and_its_piece_dropped(head):
    agent = head.register("n1", gpus=0)
    for i in range(3):
        head.submit({"command": f"echo {i}"})
    head.cycle()
    tasks = agent.tasks()
    version = agent.desired()["version"]
    agent.beat([head.running(t) for t in tasks])
    agent.beat([head.exited(tasks[0], 0)] + [head.running(t) for t in tasks[1:]])
    desired = agent.desired()
    assert desired["version"] == version  # an end the agent reported does not advance the version
    assert [t["task_id"] for t in desired["tasks"]] == [t["task_id"] for t in tasks[1:]]
    assert head.rt.desired_pieces.count("n1") == 2


def test_rank_zero_lists_the_port_its_agent_reported(head):
    agent = head.register("n1", gpus=0)
    head.submit({"command": "serve"})
    head.cycle()
    [task] = agent.tasks()
    assert "MASTER_PORT" not in task["env"]
    agent.beat([{**head.running(task), "master_port": 41234}])
    [task] = agent.tasks()
    assert task["env"]["MASTER_PORT"] == "41234"


def test_a_gang_lists_its_nodes_new_address_after_one_registers_again(head):
    n1 = head.register("n1", gpus=8, addr="10.0.0.1")
    n2 = head.register("n2", gpus=8, addr="10.0.0.2")
    head.submit({"command": "torchrun x", "nodes": 2, "resources": {"gpus": 8}})
    head.cycle()
    master, other = (n1, n2) if n1.tasks() else (n2, n1)
    [rank0] = master.tasks()
    master.beat([{**head.running(rank0), "master_port": 29500}])
    [rank1] = other.tasks()
    assert rank1["hosts"][0]["addr"] == head.nodes()[master.name]["address"]
    # The master's agent restarts on a new address and keeps the task running.
    head.register(master.name, gpus=8, addr="10.9.9.9", running=[head.running(rank0)])
    [rank1] = other.tasks()
    assert rank1["hosts"][0]["addr"] == "10.9.9.9"
    assert other.desired() == from_scratch(head, other.name)


def test_a_node_that_registers_again_gets_pieces_made_under_its_new_inventory(head):
    agent = head.register("n1", gpus=2)
    head.submit({"command": "x", "resources": {"gpus": 0.5}})
    head.cycle()
    [task] = agent.tasks()
    assert task["env"]["CORRAL_GPU_MEMORY_LIMIT_MB"] == str(40 * 1024)
    head.register("n1", gpus=2, addr="10.5.5.5", running=[head.running(task)])
    [task] = head.agents["n1"].tasks()
    assert task["hosts"] == [{"addr": "10.5.5.5", "slots": 1}]


def test_a_heartbeat_and_a_long_poll_building_one_version_at_once_serialise_each_task_once(head, monkeypatch):
    agent = head.register("n1", gpus=0)
    for i in range(5):
        head.submit({"command": f"echo {i}"})
    head.cycle()
    calls = []
    original = desired_module.desired_task
    building = threading.Event()

    def slow(*args, **kwargs):
        calls.append(args[1].id)
        if not building.is_set():
            building.set()
            time.sleep(0.5)  # the other build starts meanwhile
        return original(*args, **kwargs)

    monkeypatch.setattr(desired_module, "desired_task", slow)
    answers = {}
    first = threading.Thread(
        target=lambda: answers.update(first=agent_service.read_desired(head.rt, "n1", agent.token))
    )
    first.start()
    assert building.wait(10)
    answers["second"] = agent_service.read_desired(head.rt, "n1", agent.token)
    first.join(10)
    assert answers["first"] == answers["second"]
    assert len(DesiredState.model_validate_json(answers["first"]).tasks) == 5
    assert len(calls) == 5, "the second build waited for the first and used its pieces"
