"""Quotas along the team tree reach the simulator: teams (the trace's vc) borrow and wait as on the head."""

from __future__ import annotations

from datetime import datetime
from unittest.mock import patch

import pytest
from click.testing import CliRunner

from corral.cli.main import cli
from corral.model import TeamQuota
from corral.sched import Plan, Policy, Snapshot, get_policy, schedule
from corral.sim import SimResult, Trace, TraceJob, build_nodes, prepare, simulate
from corral.spec import ClusterSpec, NodeGroupSpec

SPEC = ClusterSpec(node_groups=[NodeGroupSpec(name="h100", count=2, gpus_per_node=8, gpu_type="H100")])
# acme ─┬─ research (8, may not borrow) ── nlp (8)
#       └─ infra (8)
QUOTAS = {
    "research": {"H100": TeamQuota(8.0, 0.0)},
    "nlp": {"H100": TeamQuota(8.0)},
    "infra": {"H100": TeamQuota(8.0)},
}
TREE = {"nlp": "research"}


def run(jobs: list[TraceJob], policy: str, *, quotas: bool = True, prune: bool = True) -> SimResult:
    nodes = build_nodes(SPEC)
    workload = prepare(Trace(tuple(jobs)), nodes)
    if not quotas:
        return simulate(workload, nodes, get_policy(policy), prune=prune)
    return simulate(workload, nodes, get_policy(policy), prune=prune, quotas=QUOTAS, team_parents=TREE)


def starts(result: SimResult) -> dict[str, float]:
    return {r.id: r.start_s for r in result.records}


JOBS = [
    TraceJob(id="a", submit_s=0, duration_s=100, gpus=8, vc="nlp"),
    TraceJob(id="b", submit_s=1, duration_s=100, gpus=8, vc="nlp"),
]


@pytest.mark.parametrize("policy", ["fifo", "default"])
@pytest.mark.parametrize("prune", [True, False])
def test_a_parents_borrowing_limit_holds_a_team_to_its_quota(policy: str, prune: bool) -> None:
    assert starts(run(JOBS, policy, quotas=False, prune=prune)) == {"a": 0, "b": 1}  # infra's 8 are idle
    assert starts(run(JOBS, policy, prune=prune)) == {"a": 0, "b": 100}  # research may not borrow them


def test_with_quotas_every_cycle_sees_every_running_job_and_the_tree() -> None:
    # A team's usage counts all its running jobs, so no cycle is pruned to the nodes with room.
    jobs = [TraceJob(id=f"j{i}", submit_s=i, duration_s=100, gpus=8, vc="infra") for i in range(3)]
    seen: list[Snapshot] = []

    def spy(snapshot: Snapshot, policy: Policy, at: datetime) -> Plan:
        seen.append(snapshot)
        return schedule(snapshot, policy, at)

    with patch("corral.sim.engine.schedule", spy), patch("corral.sim.victims.schedule", spy):
        run(jobs, "fifo")
    full = next(s for s in seen if [j.id for j in s.pending] == ["j2"])  # at t=2: both nodes busy
    assert {r.id for r in full.running} == {"j0", "j1"}
    assert (full.quotas, full.team_parents, len(full.nodes)) == (QUOTAS, TREE, 2)


def test_corral_sim_config_gives_the_scheduler_the_heads_quotas(tmp_path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc\na,0,100,8,H100,nlp\nb,1,100,8,H100,nlp\n")
    spec = tmp_path / "cluster.yaml"
    spec.write_text("node_groups:\n  - {count: 2, gpus_per_node: 8, gpu_type: H100}\n")
    config = tmp_path / "corral.yaml"
    config.write_text(
        "organisation: acme\n"
        "teams:\n"
        "  research: {quotas: {H100: {nominal: 8, borrowing_limit: 0}}}\n"
        "  nlp: {parent: research, quotas: {H100: {nominal: 8}}}\n"
        "  infra: {quotas: {H100: {nominal: 8}}}\n"
    )

    def start_of_b(*extra: str) -> float:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        args = ["sim", "--trace", str(trace), "--cluster", str(spec), "--policy", "fifo", "--out", str(out), *extra]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        header, *rows = (out / "jobs-fifo.csv").read_text().splitlines()
        column = header.split(",").index("start_s")
        return float(next(r for r in rows if r.startswith("b,")).split(",")[column])

    assert start_of_b() == 1
    assert start_of_b("--config", str(config)) == 100
    config.write_text("teams:\n  g: {quotas: {H100: {nominal: 4}}}\n  nlp: {parent: g, quotas: {H100: {nominal: 8}}}\n")
    result = CliRunner().invoke(cli, ["sim", "--trace", str(trace), "--cluster", str(spec), "--config", str(config)])
    assert result.exit_code == 2
    assert "teams.g.quotas.H100.nominal" in result.output


def test_a_policy_that_keeps_preempting_at_one_moment_exits_1_with_a_message(
    tmp_path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A moment allowed a single round of preemption: tiresias' one preemption at t=5000 counts as a loop.
    from corral.cli.main import main

    monkeypatch.setattr("corral.sim.engine.ROUNDS_PER_MOMENT", 1)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("node_groups:\n  - {name: a, count: 1, gpus_per_node: 1, gpu_type: V100}\n")
    trace = tmp_path / "trace.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus\nlong,0,10000,1\nshort,5000,100,1\n")
    args = ["sim", "--trace", str(trace), "--cluster", str(cluster), "--policy", "tiresias", "-o", "json"]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "error: policy 'tiresias' keeps preempting at t=5000" in err
    assert "Traceback" not in err
