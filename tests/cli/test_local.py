"""`corral up` and `corral down` beside a head they did not start, and with the head's options.

No daemon starts here: a head that `up` did not start is a lock held on CORRAL_HOME/head.lock, as a
head run by hand holds it, and a running head of `up`'s is a state file with a live pid."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli import local, localagents
from corral.cli.main import cli
from corral.cli.procs import alive, head_holding_home, log_since


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.delenv("CORRAL_HEAD", raising=False)
    monkeypatch.setattr(local, "spawn", lambda *a, **k: pytest.fail("nothing may start"))
    return tmp_path


@pytest.fixture
def head_by_hand(home) -> Iterator[int]:
    """What `corral head` run by hand leaves: head.lock held, its pid written in it."""
    fd = os.open(home / "head.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, b"4242\n")
    yield 4242
    os.close(fd)


def test_up_beside_a_head_started_by_hand_starts_nothing_and_says_so_once(home, head_by_hand):
    (home / "logs").mkdir()
    (home / "logs" / "head.log").write_text("corral head: another head (pid 4242) already runs\n" * 2)
    result = CliRunner().invoke(cli, ["up"])
    assert getattr(result.exception, "exit_code", None) == 1  # what `corral` exits with
    message = str(result.exception)
    assert "pid 4242" in message and "did not start" in message
    assert "another head" not in message  # not an earlier start's log lines


def test_down_beside_a_head_started_by_hand_stops_nothing_and_says_so(home, head_by_hand, monkeypatch):
    (home / local.STATE_FILE).write_text(json.dumps({"head": {"pid": None, "port": 8470}}))
    monkeypatch.setattr(local, "stop", lambda pids, timeout_s, sig=None: pids and pytest.fail(f"stopped {pids}"))
    result = CliRunner().invoke(cli, ["down"])
    assert result.exit_code == 0, result.output
    assert "stopped" not in result.output.replace("to stop", "")
    assert "nothing of its own to stop" in result.output and "pid 4242" in result.output


def test_down_with_nothing_running_says_so(home):
    (home / local.STATE_FILE).write_text(json.dumps({"head": {"pid": None}, "agents": [{"name": "a", "pid": None}]}))
    result = CliRunner().invoke(cli, ["down"])
    assert (result.exit_code, result.output) == (0, "nothing was running\n")


def test_the_home_lock_tells_whether_a_head_runs(home, head_by_hand):
    assert head_holding_home(home) == "4242"
    assert head_holding_home(home / "elsewhere") is None


def test_the_log_of_a_failed_start_is_only_what_that_start_wrote(tmp_path):
    log = tmp_path / "head.log"
    log.write_text("an earlier start\n")
    offset = log.stat().st_size
    with log.open("a") as out:
        out.write("this start\n")
    assert log_since(log, offset) == "this start\n"


def test_up_checks_the_cluster_config_before_anything_starts(home, tmp_path):
    bad = tmp_path / "cluster.yaml"
    bad.write_text("teams:\n  nlp: {members: 5, bogus: 1}\n")
    result = CliRunner().invoke(cli, ["up", "--config", str(bad)])
    assert getattr(result.exception, "exit_code", None) == 2 and "--config" in str(result.exception)
    assert "teams.nlp.bogus" in str(result.exception)
    assert not (home / local.STATE_FILE).exists()


def test_up_passes_the_config_and_head_options_and_remembers_them(home, tmp_path, monkeypatch):
    good = tmp_path / "cluster.yaml"
    good.write_text("teams:\n  nlp: {members: [bob]}\n")
    started: list[list[str]] = []
    monkeypatch.setattr(local, "spawn", lambda args, log, home, secrets=None: started.append(args) or 999_999)
    monkeypatch.setattr(local, "wait_head", lambda *a: None)
    state: dict = {}
    local._ensure_head(home, state, 12345, local._head_options(None, None, good, "H100=2.50", 5.0))
    assert started[0][-6:] == ["--config", str(good.resolve()), "--gpu-prices", "H100=2.5", "--preempt-grace", "5.0"]
    assert (state["head"]["config"], state["head"]["gpu_prices"]) == (str(good.resolve()), "H100=2.5")
    state["head"]["pid"] = None  # it stopped: the next `up` starts it with what was remembered
    local._ensure_head(home, state, None, local._head_options(None, None, None, None, None))
    assert started[1][-6:] == started[0][-6:]


def test_up_passes_every_digit_of_the_gpu_prices_on(home, monkeypatch):
    given = "H100=1234567.5,A100=0.00001,L4=2.123456789,B200=3.0"
    assert local._head_options(None, None, None, given, None)["--gpu-prices"] == (
        "H100=1234567.5,A100=0.00001,L4=2.123456789,B200=3"
    )


def test_up_notes_a_different_setting_while_the_head_runs(home, tmp_path, monkeypatch, capsys, locks):
    other = tmp_path / "other.yaml"
    other.write_text("{}\n")
    pid = locks.hold(home / "head.lock")
    state = {"head": {"pid": pid, "url": "http://127.0.0.1:1", "port": 1, "config": "/etc/a.yaml"}}
    monkeypatch.setattr(local, "healthy", lambda url: True)
    asked = local._head_options(None, None, other, None, 30.0)
    assert local._ensure_head(home, state, None, asked) == "http://127.0.0.1:1"
    err = capsys.readouterr().err
    assert f"--config {other.resolve()} applies after `corral down`" in err
    assert "--preempt-grace 30.0 applies after `corral down`" in err


def test_up_runs_as_many_agents_as_ran_after_the_last_up_none_included(tmp_path, locks):
    state: dict = {"agents": [{"name": "local-1", "pid": None}, {"name": "local-2", "pid": None}]}
    assert local._agent_count(tmp_path, state, None) == 2  # a state from before the count was remembered: its agents
    assert local._agent_count(tmp_path, state, 0) == 0  # a head alone
    assert local._agent_count(tmp_path, state, None) == 0  # and the next `up` keeps it so
    assert local._agent_count(tmp_path, state, 3) == 3
    assert local._agent_count(tmp_path, state, None) == 3
    assert local._agent_count(tmp_path, {}, None) == 1  # a new cluster
    names = ("local-1", "local-2")
    running: dict = {"agents": [{"name": n, "pid": locks.hold(tmp_path / "agents" / n / "agent.lock")} for n in names]}
    assert local._agent_count(tmp_path, running, 1) == 1  # fewer than run: none is stopped (`up` says so) ...
    running["agents"] = [{**a, "pid": None} for a in running["agents"]]  # ... and after `corral down`
    assert local._agent_count(tmp_path, running, None) == 2  # the next `up` starts the two that ran


def test_a_second_up_waits_for_the_first_to_finish(tmp_path):
    import threading

    from corral.cli.procs import one_at_a_time

    second_in = threading.Event()

    def second() -> None:
        with one_at_a_time(tmp_path, "up.lock"):
            second_in.set()

    with one_at_a_time(tmp_path, "up.lock"):
        thread = threading.Thread(target=second)
        thread.start()
        assert not second_in.wait(0.3)  # held back while the first one runs
    assert second_in.wait(5)
    thread.join(5)


@pytest.fixture
def stranger() -> Iterator[int]:
    """A process of its own session that is no head or agent: what a pid in local-cluster.json may name once
    the daemon `up` started there has ended (after the machine restarted, say)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc.pid
    proc.kill()
    proc.wait()


def test_down_leaves_a_process_alone_that_got_a_recorded_pid(home, stranger):
    state = {"head": {"pid": stranger, "port": 1, "url": "http://127.0.0.1:1"}}
    state["agents"] = [{"name": "local-1", "pid": stranger}]
    (home / local.STATE_FILE).write_text(json.dumps(state))
    result = CliRunner().invoke(cli, ["down"])
    assert (result.exit_code, result.output) == (0, "nothing was running\n")
    assert alive(stranger)


def test_up_starts_an_agent_whose_recorded_pid_another_process_got(home, stranger, monkeypatch):
    started: list[list[str]] = []
    monkeypatch.setattr(local, "spawn", lambda args, *_a, **_k: started.append(args) or 999_999)
    state = {"agents": [{"name": "local-1", "pid": stranger, "fake_gpus": "1xH100"}], "fake_gpus": "1xH100"}
    assert localagents.running_agents(home, state) == []
    localagents.check_fake_gpus(home, state, "2xL4")  # no agent runs: any GPUs may be asked for
    names, fresh = local._ensure_agents(home, state, "http://127.0.0.1:1", "cj_x", 1, "2xL4")
    assert (names, list(fresh), len(started)) == (["local-1"], ["local-1"], 1)
    assert started[0][started[0].index("--fake-gpus") + 1] == "2xL4"


def test_up_where_its_logs_cannot_be_written_exits_2_naming_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.delenv("CORRAL_HEAD", raising=False)
    (tmp_path / "logs").write_text("")  # a file where the logs directory goes
    result = CliRunner().invoke(cli, ["up", "--agents", "0"])
    assert getattr(result.exception, "exit_code", None) == 2, result.exception
    assert str(result.exception) == (
        f"CORRAL_HOME: cannot write the log {tmp_path / 'logs' / 'head.log'}: {tmp_path / 'logs'} is a file, not a"
        " directory"
    )
    assert head_holding_home(tmp_path) is None  # nothing started
