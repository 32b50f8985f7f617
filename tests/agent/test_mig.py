"""MIG devices become their own slots. No MIG-capable GPU is here, so NVML's answers come from a
scripted stand-in for the two boards below (the calls and constants are pynvml's own); on a machine
with such a GPU, tests/agent/test_gpus.py exercises the real library."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from corral.agent.env import process_env
from corral.agent.gpus import NvmlGpus, nvml
from corral.agent.gpus.nvml import mig_profile
from corral.api import DesiredTask

GIB = 1024**3


class Board:
    def __init__(self, name: str, uuid: str, memory_gib: int, migs: list[tuple[str, str, int]] | None = None):
        self.name, self.uuid, self.memory = name, uuid, memory_gib * GIB
        self.migs = [Board(n, u, m) for n, u, m in migs] if migs is not None else None


def scripted_nvml(boards: list[Board]) -> SimpleNamespace:
    """The pynvml calls discovery makes, answered for ``boards``."""

    def mig_mode(board: Board) -> tuple[int, int]:
        if board.migs is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE

    def mig_handle(board: Board, slot: int) -> Board:
        assert board.migs is not None
        if slot >= len(board.migs):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return board.migs[slot]

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
