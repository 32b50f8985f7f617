"""The agents a local cluster runs: which still run, and the GPUs and container runtime they were given
(every agent of a local cluster has the same; `corral up` refuses others while they run)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from corral.cli.procs import agent_runs
from corral.client.errors import InvalidRequest


def running_agents(home: Path, state: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of the agents `up` started that still run."""
    return [a for a in state.get("agents", []) if agent_runs(home, a)]


def agent_spec(state: dict[str, Any], agent: dict[str, Any]) -> str:
    """The --fake-gpus an agent was started with ("": the GPUs NVML finds)."""
    return str(agent.get("fake_gpus", state.get("fake_gpus")) or "")


def check_fake_gpus(home: Path, state: dict[str, Any], fake_gpus: str | None) -> None:
    """Every agent of the cluster has the same GPUs: a --fake-gpus other than the running agents' exits 2,
    before anything starts."""
    if fake_gpus is None:
        return
    running = running_agents(home, state)
    specs = sorted({agent_spec(state, a) for a in running})
    if all(same_gpus(fake_gpus, spec) for spec in specs):
        return
    have = " and ".join(spec or "the GPUs NVML finds (--fake-gpus none)" for spec in specs)
    raise InvalidRequest(
        f"--fake-gpus {fake_gpus or 'none'}: the {len(running)} running agent(s) have {have}, and every agent gets"
        " the same GPUs; run `corral down` first to change them, or give the same spec (or leave --fake-gpus out)"
    )


def agent_runtime(state: dict[str, Any], agent: dict[str, Any]) -> str:
    """The --runtime an agent was started with ("": the first that answers on its PATH)."""
    return str(agent.get("runtime", state.get("runtime")) or "")


def check_runtime(home: Path, state: dict[str, Any], runtime: str | None) -> None:
    """Every agent of the cluster runs images the same way: a --runtime other than the running agents'
    exits 2, before anything starts."""
    running = running_agents(home, state)
    have = sorted({agent_runtime(state, a) for a in running})
    if runtime is None or all(runtime == each for each in have):
        return
    used = " and ".join(each or "the first runtime that answers on PATH" for each in have)
    raise InvalidRequest(
        f"--runtime {runtime}: the {len(running)} running agent(s) use {used}, and every agent uses the same;"
        " run `corral down` first to change it (or leave --runtime out)"
    )


def same_gpus(one: str, other: str) -> bool:
    """Whether two --fake-gpus describe the same GPUs: as many of each type and memory, however grouped."""
    from corral.spec import parse_gpu_groups

    def counted(spec: str) -> Counter[tuple[str, int]]:
        total: Counter[tuple[str, int]] = Counter()
        for group in parse_gpu_groups(spec):
            total[(group.gpu_type, group.memory_mb)] += group.count
        return total

    return one == other or bool(one and other and counted(one) == counted(other))
