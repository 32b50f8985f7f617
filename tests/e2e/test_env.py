"""What a job's processes see: their GPUs, ranks and checkpoint directory, across nodes and restarts."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

PRINT_ENV = (
    'echo "rank=$RANK node=$CORRAL_NODE cvd=$CUDA_VISIBLE_DEVICES world=$WORLD_SIZE '
    'node_rank=$NODE_RANK nnodes=$NNODES job=$CORRAL_JOB_ID"'
)


def _fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split())


@pytest.mark.timeout(90)
def test_cuda_visible_devices_is_the_allocation_on_every_rank(cluster):
    shapes = {"one": (1, 1), "two": (2, 1), "gang": (2, 2)}  # (gpus per node, nodes)
    ids = {
        name: cluster.run("--gpus", str(gpus), "--nodes", str(nodes), command=PRINT_ENV)
        for name, (gpus, nodes) in shapes.items()
    }
    cluster.wait_ok(*ids.values())
    for name, job_id in ids.items():
        gpus, nodes = shapes[name]
        job = cluster.show(job_id)
        allocation = job["allocation"]
        assert len(allocation) == nodes, (name, allocation)
        assert len({a["node"] for a in allocation}) == nodes, f"{name}: a gang's ranks must be on different nodes"
        for rank, placed in enumerate(allocation):
            assert len(placed["gpus"]) == gpus, (name, placed)
            assert len(set(placed["gpus"])) == gpus
            seen = _fields(cluster.ok("logs", job_id, "--rank", str(rank)).strip())
            assert seen == {
                "rank": str(rank),
                "node": placed["node"],
                "cvd": ",".join(str(g) for g in placed["gpus"]),
                "world": str(nodes),
                "node_rank": str(rank),
                "nnodes": str(nodes),
                "job": job_id,
            }, name
        missing = cluster.cli("logs", job_id, "--rank", str(nodes))
        assert missing.returncode == 4, missing.stderr


@pytest.mark.timeout(90)
def test_failed_first_attempt_is_requeued_with_the_same_checkpoint_dir(cluster):
    attempts = cluster.workspace / "attempts.txt"
    command = (
        f'echo "$CORRAL_RESTART_COUNT $CORRAL_CHECKPOINT_DIR" >> {attempts}; '
        'if [ "$CORRAL_RESTART_COUNT" = 0 ]; then echo saved > "$CORRAL_CHECKPOINT_DIR/state"; exit 5; fi; '
        'test "$(cat "$CORRAL_CHECKPOINT_DIR/state")" = saved && test "$CORRAL_RESTART_COUNT" = 1'
    )
    job_id = cluster.run("--gpus", "1", "--max-restarts", "1", command=command)
    cluster.wait_ok(job_id)
    job = cluster.show(job_id)
    assert job["state"] == "SUCCEEDED"
    assert job["restarts"] == 1
    assert job["exit_code"] == 0
    lines = [line.split(" ", 1) for line in attempts.read_text().splitlines()]
    assert [count for count, _ in lines] == ["0", "1"]
    assert lines[0][1] == lines[1][1] == job["checkpoint_dir"]


@pytest.mark.timeout(90)
def test_the_per_gpu_launcher_starts_one_process_per_gpu(cluster):
    command = PRINT_ENV.replace('"rank=', '"local=$LOCAL_RANK lws=$LOCAL_WORLD_SIZE rank=')
    job_id = cluster.run("--gpus", "2", "--nodes", "2", "--launcher", "per-gpu", command=command)
    cluster.wait_ok(job_id)
    job = cluster.show(job_id)
    seen = {}
    for rank in range(4):
        fields = _fields(cluster.ok("logs", job_id, "--rank", str(rank)).strip())
        seen[rank] = fields
        assert fields["rank"] == str(rank)
        assert fields["world"] == "4"
        assert fields["lws"] == "2"
        assert fields["local"] == str(rank % 2)
        assert fields["node_rank"] == str(rank // 2)
        allocation = job["allocation"][rank // 2]
        assert fields["node"] == allocation["node"]
        assert fields["cvd"] == ",".join(str(g) for g in allocation["gpus"])
    assert cluster.cli("logs", job_id, "--rank", "4").returncode == 4


@pytest.mark.timeout(90)
def test_every_rank_gets_a_hostfile_of_the_gang(cluster):
    job_id = cluster.run("--gpus", "2", "--nodes", "2", command='cat "$CORRAL_HOSTFILE"')
    cluster.wait_ok(job_id)
    nodes = {n["name"]: n for n in cluster.json("nodes")}
    allocation = cluster.show(job_id)["allocation"]
    expected = "".join(f"{nodes[a['node']]['address']} slots=2\n" for a in allocation)
    for rank in (0, 1):
        assert cluster.ok("logs", job_id, "--rank", str(rank)) == expected


@pytest.mark.timeout(90)
def test_a_gang_with_its_own_master_port_starts_on_every_node_with_it(cluster):
    from corral.testing.net import free_port

    port = str(free_port())
    job_id = cluster.run(
        "--gpus", "1", "--nodes", "2", "--env", f"MASTER_PORT={port}", command=PRINT_ENV + "; echo port=$MASTER_PORT"
    )
    cluster.wait_ok(job_id, timeout=60)
    for rank in ("0", "1"):
        lines = cluster.ok("logs", job_id, "--rank", rank).splitlines()
        assert lines[-1] == f"port={port}", lines
