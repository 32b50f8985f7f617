"""GPU discovery: the fake inventory, NVML's names, and a machine without NVIDIA."""

import pynvml
import pytest

from corral.agent.gpus import FakeGpus, NvmlGpus, short_type


def test_fake_inventory_numbers_gpus_across_groups():
    inventory = FakeGpus("2xA100:40GB,1xL4:24GB", node="n1").discover()
    assert inventory.source == "fake"
    assert [(g.index, g.type, g.memory_mb) for g in inventory.gpus] == [
        (0, "A100", 40 * 1024),
        (1, "A100", 40 * 1024),
        (2, "L4", 24 * 1024),
    ]
    assert len({g.uuid for g in inventory.gpus}) == 3


def test_fake_inventory_refuses_a_bad_spec():
    with pytest.raises(ValueError, match="COUNTxTYPE"):
        FakeGpus("eight H100")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX"),
        ("NVIDIA B200", "B200"),
        ("Quadro P6000", "Quadro"),
    ],
)
def test_short_type_names(name, expected):
    assert short_type(name) == expected


def _nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_nvml_works(), reason="NVML works here: the no-GPU path is not reachable")
def test_without_nvml_the_inventory_is_empty_and_says_why():
    inventory = NvmlGpus().discover()
    assert inventory.gpus == []
    assert inventory.source == "none"
    assert "NVML" in inventory.note


@pytest.mark.skipif(not _nvml_works(), reason="needs an NVIDIA GPU and driver (NVML)")
def test_nvml_lists_the_real_gpus():
    inventory = NvmlGpus().discover()
    assert inventory.source == "nvml"
    assert inventory.gpus
    assert [g.index for g in inventory.gpus] == list(range(len(inventory.gpus)))
    assert all(g.memory_mb > 1024 and g.uuid.startswith("GPU-") for g in inventory.gpus)


def test_fake_readings_follow_whether_a_task_runs():
    from corral.agent.gpus import FakeSampler

    inventory = FakeGpus("2xH100:80GB", node="n1").discover()
    sampler = FakeSampler(inventory.gpus, seed=1)
    idle = sampler.sample({})
    assert [(s.utilization, s.memory_used_mb) for s in idle] == [(0.0, 0), (0.0, 0)]
    readings = [sampler.sample({0: 1.0}) for _ in range(5)]
    busy, other = readings[-1]
    assert 75.0 <= busy.utilization <= 100.0
    assert 0 < busy.memory_used_mb <= 80 * 1024
    assert busy.power_w > other.power_w >= 0
    assert busy.temperature_c > other.temperature_c
    assert readings[0][0].temperature_c < readings[-1][0].temperature_c  # warms up over time
    half = sampler.sample({1: 0.5})[1]
    assert 0 < half.utilization <= 50.0
