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
