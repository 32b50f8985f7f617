"""MIG devices become their own slots. No MIG-capable GPU is here, so NVML's answers come from a
scripted stand-in for the two boards below (the calls and constants are pynvml's own); on a machine
with such a GPU, tests/agent/test_gpus.py exercises the real library."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from corral.agent.containers.hpc import Enroot
from corral.agent.containers.oci import Docker, Podman
from corral.agent.containers.rank import container_run
from corral.agent.env import process_env
from corral.agent.gpus import HostDevice, NvmlGpus, nvml
from corral.agent.gpus.nvml import mig_profile
from corral.api import DesiredTask

GIB = 1024**3


class Board:
    def __init__(self, name: str, uuid: str, memory_gib: int, migs: list[tuple[str, str, int] | None] | None = None):
        self.name, self.uuid, self.memory = name, uuid, memory_gib * GIB
        # None in ``migs``: no MIG device at that index (NVML answers NOT_FOUND there)
        self.migs = [m and Board(*m) for m in migs] if migs is not None else None


def scripted_nvml(boards: list[Board]) -> SimpleNamespace:
    """The pynvml calls discovery makes, answered for ``boards``."""

    def mig_mode(board: Board) -> tuple[int, int]:
        if board.migs is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE

    def mig_handle(board: Board, slot: int) -> Board:
        assert board.migs is not None
        mig = board.migs[slot] if slot < len(board.migs) else None
        if mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return mig

    return SimpleNamespace(
        NVMLError=pynvml.NVMLError,
        NVML_DEVICE_MIG_ENABLE=pynvml.NVML_DEVICE_MIG_ENABLE,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(boards),
        nvmlDeviceGetHandleByIndex=lambda i: boards[i],
        nvmlDeviceGetName=lambda b: b.name,
        nvmlDeviceGetUUID=lambda b: b.uuid,
        nvmlDeviceGetMemoryInfo=lambda b: SimpleNamespace(total=b.memory),
        nvmlDeviceGetMigMode=mig_mode,
        nvmlDeviceGetMaxMigDeviceCount=lambda b: 7,
        nvmlDeviceGetMigDeviceHandleByIndex=mig_handle,
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
    )


@pytest.fixture
def two_boards(monkeypatch: pytest.MonkeyPatch) -> Any:
    boards = [
        Board(
            "NVIDIA H100 80GB HBM3",
            "GPU-aaaa",
            80,
            migs=[
                ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "MIG-1111", 40),
                ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "MIG-2222", 10),
                ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "MIG-3333", 10),
            ],
        ),
        Board("NVIDIA H100 80GB HBM3", "GPU-bbbb", 80),  # MIG off
    ]
    monkeypatch.setattr(nvml, "pynvml", scripted_nvml(boards))
    return NvmlGpus().discover()


def test_each_mig_device_is_a_slot_typed_by_its_profile(two_boards):
    assert two_boards.source == "nvml"
    assert [(g.index, g.type, g.memory_mb, g.uuid) for g in two_boards.gpus] == [
        (0, "H100-3g.40gb", 40 * 1024, "MIG-1111"),
        (1, "H100-1g.10gb", 10 * 1024, "MIG-2222"),
        (2, "H100-1g.10gb", 10 * 1024, "MIG-3333"),
        (3, "H100", 80 * 1024, "GPU-bbbb"),
    ]


def test_each_slot_keeps_its_gpu_index_mig_index_and_uuid_for_containers(two_boards):
    assert two_boards.devices == {
        0: HostDevice(gpu=0, mig=0, uuid="MIG-1111"),
        1: HostDevice(gpu=0, mig=1, uuid="MIG-2222"),
        2: HostDevice(gpu=0, mig=2, uuid="MIG-3333"),
        3: HostDevice(gpu=1, uuid="GPU-bbbb"),
    }
    assert [d.index_name for d in two_boards.devices.values()] == ["0:0", "0:1", "0:2", "1"]


def test_a_mig_index_is_nvmls_even_where_an_earlier_one_is_empty(monkeypatch: pytest.MonkeyPatch):
    board = Board("NVIDIA A100-SXM4-40GB", "GPU-1", 40, migs=[None, ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "MIG-9", 5)])
    monkeypatch.setattr(nvml, "pynvml", scripted_nvml([Board("NVIDIA A100-SXM4-40GB", "GPU-0", 40), board]))
    assert NvmlGpus().discover().devices == {0: HostDevice(gpu=0, uuid="GPU-0"), 1: HostDevice(1, 1, "MIG-9")}


def desired(gpus: list[int], image: str | None = None) -> DesiredTask:
    return DesiredTask(
        task_id="j/0/0",
        job_id="j",
        generation=0,
        node_rank=0,
        command="x",
        launcher="per-node",
        gpus=gpus,
        env={},
        rank_offset=0,
        processes=1,
        checkpoint_dir="/tmp/c",
        grace_s=1.0,
        image=image,
    )


@pytest.mark.parametrize(
    ("runtime", "flag", "passed"),
    [
        (Podman(), "--device", ["nvidia.com/gpu=MIG-3333"]),
        (Docker(), "--gpus", ['"device=MIG-3333"']),
        (Enroot(), "NVIDIA_VISIBLE_DEVICES", "MIG-3333"),  # for its hook, which mounts only what it names
    ],
)
def test_a_mig_slot_reaches_the_container_by_uuid_from_the_inventory(two_boards, tmp_path, runtime, flag, passed):
    task = desired([2], image="reg.io/train:1")
    env = process_env(task, 0, "n1", str(tmp_path), "m", {}, two_boards.visible)
    run = container_run(runtime, task, 0, env, tmp_path, tmp_path, True, "n1", two_boards.devices)
    if isinstance(passed, list):
        assert [run.argv[i + 1] for i, arg in enumerate(run.argv) if arg == flag] == passed
    else:
        assert run.env[flag] == passed
    assert run.env["CUDA_VISIBLE_DEVICES"] == "MIG-3333"  # the job sees exactly its slot inside


def test_a_whole_gpu_beside_mig_devices_goes_by_uuid_too(two_boards, tmp_path):
    task = desired([3], image="reg.io/train:1")  # slot 3 is the second board, GPU 1
    env = process_env(task, 0, "n1", str(tmp_path), "m", {}, two_boards.visible)
    run = container_run(Podman(), task, 0, env, tmp_path, tmp_path, True, "n1", two_boards.devices)
    assert "nvidia.com/gpu=GPU-bbbb" in run.argv  # one kind of CDI name on a node with MIG on
    assert run.env["CUDA_VISIBLE_DEVICES"] == "0"  # the only GPU inside


def test_cuda_sees_the_allocated_slots_by_uuid(two_boards):
    task = DesiredTask(
        task_id="j/0/0",
        job_id="j",
        generation=0,
        node_rank=0,
        command="x",
        launcher="per-node",
        gpus=[2, 3],
        env={},
        rank_offset=0,
        processes=1,
        checkpoint_dir="/tmp/c",
        grace_s=1.0,
    )
    env = process_env(task, 0, "n1", "/tmp/t", "m", {}, two_boards.visible)
    # Slot 3 is the second board, CUDA device 1, not 3: with MIG on, every slot goes by UUID.
    assert env["CUDA_VISIBLE_DEVICES"] == "MIG-3333,GPU-bbbb"
    assert process_env(task, 0, "n1", "/tmp/t", "m", {})["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_without_mig_slots_are_cuda_device_numbers(monkeypatch: pytest.MonkeyPatch):
    boards = [Board("NVIDIA A100-SXM4-40GB", "GPU-1", 40), Board("NVIDIA A100-SXM4-40GB", "GPU-2", 40)]
    monkeypatch.setattr(nvml, "pynvml", scripted_nvml(boards))
    inventory = NvmlGpus().discover()
    assert [(g.index, g.type) for g in inventory.gpus] == [(0, "A100"), (1, "A100")]
    assert inventory.visible == {}


@pytest.mark.parametrize(
    ("name", "memory_mb", "profile"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10240, "1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 2g.10gb", 9856, "2g.10gb"),
        ("NVIDIA H100 MIG 1g.20GB", 20480, "1g.20gb"),
        ("MIG device", 4864, "mig.5gb"),
    ],
)
def test_mig_profile_names(name, memory_mb, profile):
    assert mig_profile(name, memory_mb) == profile
