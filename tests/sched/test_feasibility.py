import pytest

from corral.model import Node, NodeState, Request
from corral.sched import never_fits
from corral.testing import make_node

CLUSTER = [
    make_node("h1").gpus(8, "H100").cpus(64).memory("512GB").build(),
    make_node("h2").gpus(8, "H100").cpus(64).memory("512GB").state(NodeState.DRAINED).build(),
    make_node("a1").gpus(4, "A100", memory="40GB").cpus(32).memory("256GB").build(),
]
OFFERS = "cluster offers: 2 nodes × 8 H100:80GB, 1 node × 4 A100:40GB"


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        pytest.param(
            Request(gpus_per_node=16),
            f"needs 16 GPUs per node but the largest node has 8 H100 ({OFFERS})",
            id="more GPUs per node than any node has",
        ),
        pytest.param(
            Request(gpus_per_node=8, gpu_types=("A100",)),
            f"needs 8 A100 GPUs per node but the largest node has 4 A100 ({OFFERS})",
            id="more GPUs of the asked type than any node has",
        ),
        pytest.param(
            Request(gpus_per_node=1, gpu_types=("B200",)),
            "no node has GPU type B200 (cluster offers: H100, A100)",
            id="unknown GPU type",
        ),
        pytest.param(
            Request(gpus_per_node=1, gpu_types=("B200", "GB200")),
            "no node has GPU types B200 or GB200 (cluster offers: H100, A100)",
            id="unknown GPU types",
        ),
        pytest.param(
            Request(nodes=4),
            f"needs 4 nodes; only 3 such nodes are registered ({OFFERS})",
            id="a CPU-only gang that reserves nothing, larger than the cluster",
        ),
        pytest.param(
            Request(nodes=3, gpus_per_node=8, gpu_types=("H100",)),
            f"needs 3 nodes with 8 H100 GPUs each; only 2 such nodes are registered ({OFFERS})",
            id="too few nodes",
        ),
        pytest.param(
            Request(nodes=3, gpus_per_node=4),
            f"needs 3 nodes with 4 GPUs each, all of one GPU type; only 2 such nodes are registered ({OFFERS})",
            id="a gang never mixes types",
        ),
        pytest.param(
            Request(gpus_per_node=4, gpu_types=("A100",), cpus_per_node=48),
            "needs 48 CPUs per node but the largest node with 4 A100 GPUs has 32 (cluster offers: "
            "2 nodes × 8 H100:80GB (64 CPUs), 1 node × 4 A100:40GB (32 CPUs))",
            id="more CPUs than a suitable node has",
        ),
        pytest.param(
            Request(cpus_per_node=8, memory_mb_per_node=1024 * 1024),
            "needs 1TB memory per node but the largest node has 512GB (cluster offers: "
            "2 nodes × 8 H100:80GB (64 CPUs, 512GB memory), 1 node × 4 A100:40GB (32 CPUs, 256GB memory))",
            id="more memory than any node has",
        ),
        pytest.param(
            Request(nodes=0, gpus_per_node=1),
            "needs at least 1 node, got 0",
            id="no nodes asked for",
        ),
    ],
)
def test_never_fits(request_: Request, message: str) -> None:
    assert never_fits(request_, CLUSTER) == message


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(Request(nodes=2, gpus_per_node=8, gpu_types=("H100",)), id="drained nodes still count"),
        pytest.param(Request(gpus_per_node=4, gpu_types=("B200", "A100")), id="a later acceptable type"),
        pytest.param(Request(gpus_per_node=0.5, gpu_types=("A100",)), id="fractional"),
        pytest.param(Request(nodes=3, cpus_per_node=32, memory_mb_per_node=256 * 1024), id="cpu-only on every node"),
        pytest.param(Request(nodes=2, gpus_per_node=4), id="two nodes of one type"),
    ],
)
def test_could_fit(request_: Request) -> None:
    assert never_fits(request_, CLUSTER) is None


def test_no_registered_nodes_is_not_a_verdict() -> None:
    assert never_fits(Request(gpus_per_node=8), []) is None


def test_gpu_request_on_a_cluster_without_gpus() -> None:
    nodes: list[Node] = [make_node("c1").cpus(16).memory("64GB").build()]
    assert never_fits(Request(gpus_per_node=1), nodes) == (
        "needs 1 GPU per node but no registered node has GPUs (cluster offers: 1 node without GPUs)"
    )


def test_cpus_and_memory_on_different_nodes() -> None:
    nodes = [make_node("cpu").cpus(64).memory("16GB").build(), make_node("mem").cpus(4).memory("1TB").build()]
    assert never_fits(Request(cpus_per_node=32, memory_mb_per_node=512 * 1024), nodes) == (
        "no registered node has 32 CPUs and 512GB memory "
        "(cluster offers: 1 node without GPUs (4 CPUs, 1TB memory), 1 node without GPUs (64 CPUs, 16GB memory))"
    )


def test_offers_are_capped() -> None:
    nodes = [make_node(f"n{i}").gpus(i + 1).build() for i in range(8)]
    message = never_fits(Request(gpus_per_node=16), nodes)
    assert message is not None
    assert message.endswith(
        "(cluster offers: 1 node × 8 H100:80GB, 1 node × 7 H100:80GB, 1 node × 6 H100:80GB, "
        "1 node × 5 H100:80GB, 1 node × 4 H100:80GB, 1 node × 3 H100:80GB, and 2 more)"
    )
