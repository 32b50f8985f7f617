"""``corral sim plan``: the smallest cluster for a p95 wait target, on hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.sched import get_policy
from corral.sim import Trace, TraceJob
from corral.sim.families import PlanError, concurrent_nodes, families, mix_family, type_family
from corral.sim.plan import plan
from corral.spec import ClusterSpec, NodeGroupSpec

# 20 one-GPU jobs of 100 s, all submitted at 0. On g one-GPU nodes under fifo job k waits
# floor(k / g) × 100 s; the p95 interpolates the sorted waits at rank 19 × 0.95 = 18.05:
# g = 9: 200 s; g = 10..18: 100 s; g = 19: 0 + 0.05 × 100 = 5 s; g = 20: 0.
TWENTY = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,user,vc,status\n" + "".join(
    f"j{k:02d},0,100,1,,,,\n" for k in range(20)
)
T4_NODES = "node_groups:\n  - {name: t4, count: 3, gpus_per_node: 1, gpu_type: T4, price_per_gpu_hour: 1.0}\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    trace = tmp_path / "trace.csv"
    trace.write_text(TWENTY)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(T4_NODES)
    return trace, cluster


def run(files: tuple[Path, Path], *args: str) -> tuple[int, str]:
    """The exit code and stdout (stderr goes with it unless the command printed JSON)."""
    trace, cluster = files
    base = ["sim", "plan", "--trace", str(trace), "--cluster", str(cluster), "--policy", "fifo"]
    result = CliRunner().invoke(cli, [*base, *args])
    return result.exit_code, result.stdout if "json" in args else result.output


def failed(files: tuple[Path, Path], *args: str) -> tuple[dict[str, Any], str]:
    """The JSON document and the error message of a plan that exits 1."""
    trace, cluster = files
    base = ["sim", "plan", "--trace", str(trace), "--cluster", str(cluster), "--policy", "fifo"]
    result = CliRunner().invoke(cli, [*base, *args, "-o", "json"])
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout), result.stderr


def recommended(files: tuple[Path, Path], *args: str) -> dict[str, object]:
    code, out = run(files, *args, "-o", "json")
    assert code == 0, out
    best = json.loads(out)["recommended"]
    assert isinstance(best, dict)
    return best


@pytest.mark.parametrize(
    ("target", "nodes", "p95"),
    [("150s", 10, 100), ("100", 10, 100), ("99s", 19, 5), ("0", 20, 0), ("0m", 20, 0), ("00:00:00", 20, 0)],
)
def test_plan_finds_the_smallest_node_count(files: tuple[Path, Path], target: str, nodes: int, p95: float) -> None:
    best = recommended(files, "--target-p95-wait", target)
    assert (best["candidate"], best["nodes"], best["gpus"]) == ("T4", nodes, nodes)
    assert best["p95_wait_s"] == pytest.approx(p95)
    assert best["cost_per_hour"] == nodes * 1.0
    assert best["node_groups"] == [
        {"name": "t4", "gpu_type": "T4", "count": nodes, "gpus_per_node": 1, "gpus": nodes, "price_per_gpu_hour": 1.0}
    ]


def test_the_cheapest_candidate_wins(files: tuple[Path, Path]) -> None:
    # One 8-GPU H100 node (catalogue: 9.80 per GPU-hour, speed 4) meets 150 s too, at 78.40 per hour.
    code, out = run(files, "--target-p95-wait", "150s", "--gpu-type", "H100", "--gpu-type", "T4", "-o", "json")
    assert code == 0, out
    document = json.loads(out)
    h100, t4 = document["candidates"]
    assert (h100["candidate"], h100["nodes"], h100["cost_per_hour"]) == ("H100", 1, pytest.approx(78.4))
    assert document["recommended"]["candidate"] == "T4"
    assert document["simulations"] == h100["simulations"] + t4["simulations"]


def test_a_gpu_type_given_twice_whatever_its_case_is_one_candidate(files: tuple[Path, Path]) -> None:
    code, out = run(files, "--target-p95-wait", "150s", "--gpu-type", "h100", "--gpu-type", "H100", "-o", "json")
    assert code == 0, out
    assert [c["candidate"] for c in json.loads(out)["candidates"]] == ["H100"]


def test_the_table_names_the_mix_and_counts_simulations(files: tuple[Path, Path]) -> None:
    code, out = run(files, "--target-p95-wait", "2m30s")
    assert code == 0, out
    assert "simulations" in out
    assert "recommended: t4 10×1 T4 (10 GPUs), 10.00 per hour" in out


def test_an_impossible_target_exits_1_with_the_closest(files: tuple[Path, Path]) -> None:
    document, message = failed(files, "--target-p95-wait", "150s", "--max-gpus", "9")
    assert document["recommended"] is None
    closest = document["candidates"][0]
    assert (closest["meets_target"], closest["nodes"], closest["p95_wait_s"]) == (False, 9, 200)
    assert closest["reason"] == "misses at the largest size searched"  # as the table says
    assert "no candidate cluster meets p95 wait <= 150s" in message


def test_a_cluster_larger_than_max_gpus_says_so_without_a_pricing_hint(files: tuple[Path, Path]) -> None:
    cluster = files[1]
    cluster.write_text(T4_NODES.replace("gpus_per_node: 1", "gpus_per_node: 8"))  # no cluster below 8 GPUs
    document, message = failed(files, "--target-p95-wait", "1h", "--max-gpus", "4")
    assert "above --max-gpus" in document["candidates"][0]["reason"]
    assert "no candidate cluster can run this trace" in message and "price_per_gpu_hour" not in message


def test_a_plan_given_two_policies_exits_2(files: tuple[Path, Path]) -> None:
    code, out = run(files, "--target-p95-wait", "1h", "--policy", "default")
    assert code == 2
    assert "--policy" in out and "give it once" in " ".join(out.split())


def test_a_type_jobs_cannot_use_is_infeasible(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_type\na,0,100,1,T4\nb,0,100,1,\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(T4_NODES)
    document, message = failed((trace, cluster), "--target-p95-wait", "1h", "--gpu-type", "H100")
    assert "no candidate cluster can run this trace" in message
    entry = document["candidates"][0]
    assert entry["reason"] == "some jobs can never run on it (they ask for other GPU types)"
    assert entry["simulations"] == 0


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--target-p95-wait", "soon"], "--target-p95-wait"),
        (["--target-p95-wait", "1h", "--gpu-type", "Z9"], "--gpu-type Z9: Z9 is neither in the cluster file"),
        (["--target-p95-wait", "1h", "--policy", "srtf"], "unknown policy 'srtf'"),
        (["--target-p95-wait", "-5m"], "--target-p95-wait: must be 0 or more, got '-5m'"),
        (["--target-p95-wait", "-0"], "--target-p95-wait: must be 0 or more"),
        (["--target-p95-wait", "1h", "--gpu-type", ""], "--gpu-type: the GPU type name is empty (''); name one of"),
        (["--target-p95-wait", "1h", "--gpu-type", "T4", "--gpu-type", " "], "--gpu-type: the GPU type name is empty"),
    ],
)
def test_bad_plan_options_exit_2(files: tuple[Path, Path], args: list[str], text: str) -> None:
    code, out = run(files, *args)
    assert code == 2
    assert text in " ".join(out.split())


def test_plan_and_the_simulation_share_the_sim_command(files: tuple[Path, Path]) -> None:
    trace, cluster = files
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "plan", "--target-p95-wait", "1h"])
    assert result.exit_code == 2
    assert "--trace: give the options after 'plan'" in result.output
    result = CliRunner().invoke(cli, ["sim", "--cluster", str(cluster)])
    assert result.exit_code == 2
    assert "Missing option '--trace'" in result.output


def job(job_id: str, submit: float, duration: float, gpus: int, types: tuple[str, ...] = ()) -> TraceJob:
    return TraceJob(id=job_id, submit_s=submit, duration_s=duration, gpus=gpus, gpu_types=types)


def test_concurrent_nodes_counts_whole_nodes_at_the_busiest_moment() -> None:
    # a [0, 100) holds 1 node, b [50, 150) 12 GPUs = 2 nodes, c [100, 110) 1 node: 3 at 50 and at 100.
    trace = Trace(jobs=(job("a", 0, 100, 1), job("b", 50, 100, 12), job("c", 100, 10, 8)))
    assert concurrent_nodes(trace, 8, 1.0) == 3
    assert concurrent_nodes(trace, 8, 0.5) == 4  # at half speed a runs until 200, so at 100 a, b and c run
    assert concurrent_nodes(trace, 4, 1.0) == 5  # on 4-GPU nodes, at 100: b holds 3 nodes and c 2
    # A job ending as another arrives frees its node first; a job of no duration holds its node for its moment.
    assert concurrent_nodes(Trace(jobs=(job("a", 0, 100, 1), job("b", 100, 100, 1))), 8, 1.0) == 1
    assert concurrent_nodes(Trace(jobs=(job("a", 0, 100, 1), job("b", 50, 0, 1))), 8, 1.0) == 2


def test_default_candidates_are_the_mix_and_each_type() -> None:
    spec = ClusterSpec(
        node_groups=[
            NodeGroupSpec(name="small", count=2, gpus_per_node=4, gpu_type="A100"),
            NodeGroupSpec(name="big", count=6, gpus_per_node=8, gpu_type="A100"),
            NodeGroupSpec(name="g2", count=1, gpus_per_node=8, gpu_type="G2"),
        ]
    )
    trace = Trace(jobs=(job("a", 0, 100, 1),))
    found = families(spec, trace)
    assert [f.name for f in found] == ["mix", "A100", "G2"]
    mix, a100, g2 = found
    assert [g.count for g in mix.build(9).node_groups] == [2, 6, 1]  # the file's 9 nodes
    assert [g.count for g in mix.build(10).node_groups] == [3, 7, 2]  # ceil(2 × 10 / 9), ceil(6 × 10 / 9), …
    assert [g.count for g in mix.build(18).node_groups] == [4, 12, 2]
    assert mix.problem == "no price_per_gpu_hour for node group(s) g2"
    assert a100.build(3).node_groups[0].gpus_per_node == 8  # the widest A100 nodes
    assert a100.problem is None  # priced from the catalogue
    assert g2.problem is not None
    with pytest.raises(PlanError, match="--gpu-type G2: node group g2 has no price_per_gpu_hour"):
        type_family(spec, "G2", trace, flag="--gpu-type G2")


def test_the_search_stops_at_the_zero_wait_size() -> None:
    spec = ClusterSpec(node_groups=[NodeGroupSpec(count=1, gpus_per_node=1, gpu_type="T4")])
    trace = Trace(jobs=tuple(job(f"j{k}", 0, 100, 1) for k in range(4)))
    found = type_family(spec, "T4", trace)
    assert (found.fits_by, found.zero_wait) == (1, 4)
    heard: list[tuple[str, int]] = []
    result = plan(trace, [found], get_policy("fifo"), 0.0, on_trial=lambda name, gpus: heard.append((name, gpus)))
    assert result.recommended is not None and result.recommended.trial is not None
    assert result.recommended.trial.size == 4
    assert heard == [("T4", 1), ("T4", 2), ("T4", 4), ("T4", 3)]  # doubling to 4, then 3 misses
    assert result.simulations == 4
    assert mix_family(spec, trace).zero_wait == 4


def test_the_mix_keeps_the_file_s_proportions(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TWENTY)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "node_groups:\n"
        "  - {name: a, count: 1, gpus_per_node: 1, gpu_type: T4, price_per_gpu_hour: 1.0}\n"
        "  - {name: b, count: 1, gpus_per_node: 1, gpu_type: T4, price_per_gpu_hour: 2.0}\n"
    )
    code, out = run((trace, cluster), "--target-p95-wait", "150s", "-o", "json")
    assert code == 0, out
    document = json.loads(out)
    mix, t4 = document["candidates"]
    # The mix needs 10 GPUs: 5 nodes in each group, at 5 × 1.0 + 5 × 2.0 per hour.
    assert (mix["candidate"], [g["count"] for g in mix["node_groups"]], mix["cost_per_hour"]) == ("mix", [5, 5], 15.0)
    assert (t4["candidate"], t4["nodes"], t4["cost_per_hour"]) == ("T4", 10, 10.0)
    assert document["recommended"]["candidate"] == "T4"


def test_a_types_speed_in_the_cluster_file_counts_whatever_the_case_of_its_key() -> None:
    from corral.sim.families import speed_of
    from corral.spec import ClusterSpec, NodeGroupSpec

    cluster = ClusterSpec(
        node_groups=[NodeGroupSpec(count=1, gpus_per_node=4, gpu_type="A100")], gpu_speed={"h100": 3.0}
    )
    assert speed_of(cluster, "H100") == 3.0  # not the catalogue's 4.0
    assert speed_of(cluster, "A100") == 1.0  # a type of the file it does not list
    assert speed_of(cluster, "L4") == 0.5  # a type it does not have: the catalogue's


def test_under_a_preemptive_policy_time_queued_after_a_preemption_counts(tmp_path: Path) -> None:
    # 20 one-GPU jobs of 100,000 s, one every 8,000 s: 13 run at once at the busiest (those submitted in the
    # last 100,000 s). With fewer GPUs, `default` starts each new job at once by preempting a demoted one,
    # so a wait counted only to the first start would be 0 on one GPU; counted in full, 13 GPUs are needed.
    trace = tmp_path / "over.csv"
    trace.write_text(
        "job_id,submit_time_s,duration_s,num_gpus\n" + "".join(f"j{k:02d},{k * 8000},100000,1\n" for k in range(20))
    )
    cluster = tmp_path / "one.yaml"
    cluster.write_text(
        "node_groups:\n  - {name: v, count: 1, gpus_per_node: 1, gpu_type: V100, price_per_gpu_hour: 1.0}\n"
    )
    args = ["sim", "plan", "--trace", str(trace), "--cluster", str(cluster), "--target-p95-wait", "0", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    best = json.loads(result.stdout)["recommended"]
    assert (best["gpus"], best["p95_wait_s"]) == (13, 0.0)


def test_the_help_says_the_target_counts_time_queued_after_preemptions() -> None:
    result = CliRunner().invoke(cli, ["sim", "plan", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "start - submit" not in text
    assert "after each preemption until the next" in text


# 60 one-GPU jobs of 95 years, all submitted at 0: one after another on one GPU they take 5,700 years,
# past the simulated clock's limit; on two, 2,850 years. Under fifo job k waits floor(k / g) × 3e9 s on
# g GPUs, so the p95 (rank 59 × 0.95 = 56.05) is 0 from g = 58 on, and 0.05 × 3e9 s on 57.
DECADES = "job_id,submit_time_s,duration_s,num_gpus\n" + "".join(f"j{k:02d},0,3000000000,1\n" for k in range(60))


def test_a_size_whose_jobs_run_past_the_clock_misses_and_the_search_goes_on(tmp_path: Path) -> None:
    spec = ClusterSpec(node_groups=[NodeGroupSpec(count=1, gpus_per_node=1, gpu_type="T4", price_per_gpu_hour=1.0)])
    trace = Trace(jobs=tuple(job(f"j{k:02d}", 0, 3e9, 1) for k in range(60)))
    family = type_family(spec, "T4", trace)
    heard: list[int] = []
    result = plan(trace, [family], get_policy("fifo"), 0.0, on_trial=lambda name, gpus: heard.append(gpus))
    assert heard[0] == 1  # the first size simulated overran the clock, and the search went on
    assert result.recommended is not None and result.recommended.trial is not None
    assert result.recommended.trial.size == 58
    trace_file, cluster = tmp_path / "decades.csv", tmp_path / "t4.yaml"
    trace_file.write_text(DECADES)
    cluster.write_text(T4_NODES)
    assert recommended((trace_file, cluster), "--target-p95-wait", "0")["gpus"] == 58


def test_a_largest_size_whose_jobs_run_past_the_clock_is_listed_as_missing(tmp_path: Path) -> None:
    trace_file, cluster = tmp_path / "decades.csv", tmp_path / "t4.yaml"
    trace_file.write_text(DECADES)
    cluster.write_text(T4_NODES)
    document, error = failed((trace_file, cluster), "--target-p95-wait", "0", "--max-gpus", "1")
    assert "no candidate cluster meets" in error
    (t4,) = document["candidates"]
    assert (t4["meets_target"], t4["gpus"], t4["simulations"]) == (False, 1, 1)
    assert "past the simulated clock's 5,000-year limit" in t4["reason"]
    assert (t4["p95_wait_s"], t4["avg_wait_s"], t4["avg_jct_s"], t4["utilization"]) == (None, None, None, None)
    code, out = run((trace_file, cluster), "--target-p95-wait", "0", "--max-gpus", "1")
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("T4"))
    assert row.split()[6:8] == ["-", "-"] and "5,000-year limit" in row


def test_the_zero_wait_size_counts_gangs_slowed_across_racks(tmp_path: Path) -> None:
    # Two 16-GPU gangs on 8-GPU nodes, one rack per node: each spans two racks and runs 100 x 100 s.
    # On 2 nodes b waits for a (p95 wait 2h38m); from 4 nodes it starts on arrival, so the search
    # must reach 4, though at traced speed a would be gone before b arrives.
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\na,0,100,16\nb,200,100,16\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        "node_groups: [{count: 2, gpus_per_node: 8, gpu_type: V100, nodes_per_rack: 1, price_per_gpu_hour: 1}]\n"
        "cross_rack_slowdown: 100\n"
    )
    args = ["sim", "plan", "--trace", str(trace), "--cluster", str(cluster), "--target-p95-wait", "0", "-o", "json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    recommended = json.loads(result.stdout)["recommended"]
    assert (recommended["nodes"], recommended["p95_wait_s"]) == (4, 0)
