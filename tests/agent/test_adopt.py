"""Tasks that outlive their agent: the exit-status wrapper, adopted ranks, and finding survivors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from corral.agent.adopt import INDEX, LEGACY_INDEX, LiveIndex, RankRecord, find_tasks, forget, write_record
from corral.agent.launch import (
    MARKER_ENV,
    UNRECORDED_STATUS,
    AdoptedProcess,
    ProcKey,
    describe_exit,
    markers_with_prefix,
    read_exit_file,
    recording_exit,
    terminate_tree,
)
from corral.agent.launch.procfs import key_of
from corral.api import DesiredTask

pytestmark = pytest.mark.timeout(20)


def _spawn(
    command: str | list[str], exit_file: Path, env: dict[str, str] | None = None, output: bool = False
) -> subprocess.Popen[bytes]:
    """Run ``command`` under the wrapper in its own session, as the agent does."""
    return subprocess.Popen(
        recording_exit(command, exit_file),
        start_new_session=True,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE if output else subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.parametrize(
    ("command", "status"),
    [("exit 3", 3), ("true", 0), (["/bin/sh", "-c", "exit 7"], 7), ("kill -KILL $$", 137), ("no-such-cmd-x", 127)],
)
def test_the_wrapper_records_the_exit_status_and_exits_with_it(tmp_path, command, status):
    exit_file = tmp_path / "exit-0"
    proc = _spawn(command, exit_file)
    assert proc.wait(10) == status
    assert read_exit_file(exit_file) == status


def test_sigterm_reaches_the_command_and_the_wrapper_waits_for_it_to_finish(tmp_path):
    exit_file = tmp_path / "exit-0"
    # The trap is set after the fork: a child forked with the handler in place could lose the signal.
    script = 'sleep 30 & trap "kill $!; sleep 0.3; echo saved; exit 9" TERM; echo ready; wait'
    proc = _spawn(script, exit_file, output=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    os.killpg(proc.pid, signal.SIGTERM)  # the whole group, as a stop does
    output, _ = proc.communicate(timeout=10)
    assert proc.returncode == 9
    assert b"saved" in output and b"Terminated" not in output
    assert read_exit_file(exit_file) == 9


def test_the_wrapper_keeps_stderr_and_leaves_no_extra_descriptor(tmp_path):
    proc = _spawn("echo oops >&2; ls /proc/$$/fd", tmp_path / "exit-0", output=True)
    out, _ = proc.communicate(timeout=10)
    assert out.split() == [b"oops", b"0", b"1", b"2"]


def test_an_adopted_rank_reports_the_status_its_wrapper_recorded(tmp_path):
    asyncio.run(_an_adopted_rank_reports_the_status_its_wrapper_recorded(tmp_path))


async def _an_adopted_rank_reports_the_status_its_wrapper_recorded(tmp_path):
    exit_file = tmp_path / "exit-0"
    flag = tmp_path / "go"
    proc = _spawn(f"while [ ! -e {flag} ]; do sleep 0.05; done; exit 4", exit_file)
    adopted = AdoptedProcess(key_of(proc.pid), "m", exit_file)
    waiting = asyncio.create_task(adopted.wait())
    await asyncio.sleep(0.3)
    assert not waiting.done() and adopted.returncode is None
    flag.touch()
    await asyncio.to_thread(proc.wait, 10)
    assert await asyncio.wait_for(waiting, 5) == 4
    assert adopted.returncode == 4


def test_an_adopted_rank_whose_wrapper_was_killed_outright_counts_as_sigkilled(tmp_path):
    asyncio.run(_an_adopted_rank_whose_wrapper_was_killed_outright_counts_as_sigkilled(tmp_path))


async def _an_adopted_rank_whose_wrapper_was_killed_outright_counts_as_sigkilled(tmp_path):
    exit_file = tmp_path / "exit-0"
    proc = _spawn("sleep 30", exit_file)
    adopted = AdoptedProcess(key_of(proc.pid), "m", exit_file)
    os.killpg(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 10)
    assert await asyncio.wait_for(adopted.wait(), 5) == UNRECORDED_STATUS
    assert describe_exit(UNRECORDED_STATUS) == "killed by signal SIGKILL"


def test_a_restarted_agent_finds_its_running_and_ended_tasks_by_marker_and_index(tmp_path):
    asyncio.run(_a_restarted_agent_finds_its_running_and_ended_tasks_by_marker_and_index(tmp_path))


async def _a_restarted_agent_finds_its_running_and_ended_tasks_by_marker_and_index(tmp_path):
    node = f"node-{uuid.uuid4().hex[:8]}"
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    desired = _desired(tmp_path)
    marker = f"{node}:{desired.task_id}"
    env = {MARKER_ENV: marker, "CORRAL_TASK_DIR": str(task_dir)}
    kept = _spawn("sleep 30", task_dir / "exit-0", env)
    no_record = str(tmp_path / "no-record")
    stray = _spawn("sleep 30", tmp_path / "exit-x", {MARKER_ENV: f"{node}:j-2/0/0", "CORRAL_TASK_DIR": no_record})
    # The same node name under another agent's work directory (another local cluster on this host).
    elsewhere = tmp_path.parent / f"{tmp_path.name}-other" / "task"
    foreign = _spawn(
        "sleep 30", tmp_path / "exit-y", {MARKER_ENV: f"{node}:j-3/0/0", "CORRAL_TASK_DIR": str(elsewhere)}
    )
    try:
        deadline = time.monotonic() + 5
        while len(markers_with_prefix(f"{node}:")) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # until both have exec'd with their environment
        key = key_of(kept.pid)
        record = RankRecord(0, key.pid, key.start, str(tmp_path / "rank-0.log"), str(task_dir / "exit-0"))
        write_record(task_dir, desired, 29501, [record], LiveIndex(tmp_path / INDEX))
        index = LiveIndex(tmp_path / INDEX)  # as a restarted agent reads it
        found = await asyncio.to_thread(find_tasks, node, index, tmp_path)
        assert found.unknown == [f"{node}:j-2/0/0"]  # not j-3: another agent's, neither adopted nor stopped
        assert found.finished == []
        [survivor] = found.running
        assert (survivor.task_id, survivor.generation, survivor.master_port) == ("j-1/2/0", 2, 29501)
        report = survivor.report()
        assert (report.state, report.generation, report.master_port) == ("RUNNING", 2, 29501)
        [process] = survivor.processes()
        assert process.key == ProcKey(key.pid, key.start)
        started = time.monotonic()
        await terminate_tree(survivor.processes(), marker, 1.0)
        assert kept.wait(5) == 143 and time.monotonic() - started < 2.0
        assert read_exit_file(task_dir / "exit-0") == 143
        # Once its processes are gone, the index still knows it: it ended while no agent watched.
        [ended] = (await asyncio.to_thread(find_tasks, node, index, tmp_path)).finished
        report = ended.final_report()
        assert (report.state, report.exit_code) == ("EXITED", 143)
        forget(index, desired.task_id)
        assert (await asyncio.to_thread(find_tasks, node, LiveIndex(tmp_path / INDEX), tmp_path)).finished == []
        assert foreign.poll() is None
    finally:
        for proc in (kept, stray, foreign):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


@pytest.mark.parametrize(
    ("statuses", "code"),
    [([0, 0], 0), ([143, 3], 3), ([None, 0], UNRECORDED_STATUS), ([5, 4], 5), ([143, 137], 143)],
)
def test_the_final_report_names_the_first_failure_not_a_stopped_sibling(tmp_path, statuses, code):
    ranks = []
    for rank, status in enumerate(statuses):
        exit_file = tmp_path / f"exit-{rank}"
        if status is not None:
            exit_file.write_text(f"{status}\n")
        ranks.append(RankRecord(rank, 1, 1, "log", str(exit_file)))
    desired = _desired(tmp_path, processes=len(statuses))
    write_record(tmp_path, desired, 0, ranks, LiveIndex(tmp_path / INDEX))
    [ended] = find_tasks("no-such-node", LiveIndex(tmp_path / INDEX), tmp_path).finished
    report = ended.final_report()
    assert report.exit_code == code
    assert report.detail == ("" if code == 0 else f"{describe_exit(code)} while the agent was away")


def _desired(tmp_path: Path, processes: int = 1) -> DesiredTask:
    return DesiredTask(
        task_id="j-1/2/0",
        job_id="j-1",
        generation=2,
        node_rank=0,
        command="sleep 30",
        launcher="per-gpu",
        gpus=list(range(processes)),
        env={},
        rank_offset=0,
        processes=processes,
        checkpoint_dir=str(tmp_path / "ckpt"),
        grace_s=1.0,
    )


def test_the_live_index_is_a_journal_a_restarted_agent_reads_and_rewrites_with_the_live_tasks_only(tmp_path):
    path = tmp_path / INDEX
    index = LiveIndex(path)
    for n in range(5):
        index.add(f"j-{n}/0/0", tmp_path / f"task {n}")
    for n in (1, 3):
        forget(index, f"j-{n}/0/0")
    with path.open("a") as journal:
        journal.write("+ j-9%2F0%2F0")  # a line cut short by a crash
    again = LiveIndex(path)
    assert again.entries() == {f"j-{n}/0/0": tmp_path / f"task {n}" for n in (0, 2, 4)}
    assert len(path.read_text().splitlines()) == 3  # rewritten: ended tasks and the torn line are gone


def test_the_live_index_is_rewritten_once_ended_tasks_pile_up(tmp_path, monkeypatch):
    monkeypatch.setattr(LiveIndex, "COMPACT_AFTER", 6)
    path = tmp_path / INDEX
    index = LiveIndex(path)
    index.add("kept/0/0", tmp_path / "kept")
    for n in range(10):
        index.add(f"j-{n}/0/0", tmp_path / str(n))
        forget(index, f"j-{n}/0/0")
    assert len(path.read_text().splitlines()) < 10  # a journal of 21 lines without rewriting
    assert LiveIndex(path).entries() == {"kept/0/0": tmp_path / "kept"}


def test_an_older_agents_index_directory_is_read_and_folded_into_the_journal(tmp_path):
    legacy = tmp_path / LEGACY_INDEX
    legacy.mkdir()
    (legacy / "j-1%2F0%2F0").write_text(str(tmp_path / "old"))
    index = LiveIndex(tmp_path / INDEX)
    assert index.entries() == {"j-1/0/0": tmp_path / "old"}
    assert not legacy.exists()
    assert LiveIndex(tmp_path / INDEX).entries() == {"j-1/0/0": tmp_path / "old"}


def test_a_task_stopped_by_the_agents_shutdown_is_reported_interrupted_by_the_next_agent(tmp_path):
    from corral.agent.adopt import Survivor, mark_interrupted

    desired = _desired(tmp_path)
    exit_file = tmp_path / "exit-0"
    exit_file.write_text("143\n")
    survivor = Survivor(f"n:{desired.task_id}", tmp_path, desired, 0, (RankRecord(0, 1, None, "", str(exit_file)),))
    assert not survivor.final_report().interrupted
    mark_interrupted(tmp_path)
    report = survivor.final_report()
    assert report.interrupted and report.exit_code == 143
    assert "the agent was shutting down" in report.detail
