"""`corral head`, `corral agent` and `corral up` refuse bad values (exit 2, the option named) before anything is
created or started; options given to `up` while its head runs are saved for the head's next start.

Nothing long-lived starts here: every case fails before the daemon would, or `spawn` and the head's
`run` are replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corral.cli import local
from corral.cli.daemons import parse_prices
from corral.cli.main import main
from corral.client.errors import InvalidRequest


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"  # not created: a refused command must not create it either
    monkeypatch.setenv("CORRAL_HOME", str(home))
    monkeypatch.delenv("CORRAL_HEAD", raising=False)
    monkeypatch.delenv("CORRAL_TOKEN", raising=False)
    monkeypatch.setattr(local, "spawn", lambda *a, **k: pytest.fail("nothing may start"))
    return home


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return ended.value.code, err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--node-timeout", "0"], "--node-timeout"),
        (["--node-timeout", "-1"], "--node-timeout"),
        (["--node-timeout", "nan"], "--node-timeout"),
        (["--heartbeat-interval", "0"], "--heartbeat-interval"),
        (["--grace", "-1"], "--grace"),
        (["--preempt-grace", "-1"], "--preempt-grace"),
        (["--preempt-grace", "nan"], "--preempt-grace"),
        (["--gpu-prices", "H100=nan"], "--gpu-prices"),
        (["--gpu-prices", "H100=inf"], "--gpu-prices"),
        (["--agent-lease", "0"], "--agent-lease"),
        (["--public-url", "notaurl"], "--public-url"),
        (["--public-url", "http://a:1,http://b:2"], "--public-url"),
    ],
)
def test_head_refuses_bad_numbers_and_urls(home, capsys, args, named):
    code, err = run_cli(["head", "--port", "1", *args], capsys)
    assert code == 2, err
    assert named in err
    assert not home.exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--preempt-grace", "nan"], "--preempt-grace"),
        (["--gpu-prices", "H100=nan"], "--gpu-prices"),
        (["--gpu-prices", "A100=1,H100=inf"], "--gpu-prices"),
        (["--gpu-prices", "H100=1,A100=2,H100=4"], "'H100' is priced twice (H100=1 and H100=4"),
        (["--gpu-prices", "H100=2.5,"], "got an empty entry (entry 2 of 2 in 'H100=2.5,')"),
    ],
)
def test_up_refuses_numbers_that_are_not_finite_before_anything_starts(home, capsys, args, named):
    code, err = run_cli(["up", "--agents", "0", *args], capsys)
    assert code == 2, err
    assert named in err
    assert not home.exists()


@pytest.mark.parametrize(
    ("given", "prices"),
    [
        ("", {}),
        ("  ", {}),
        ("H100=2.5", {"H100": 2.5}),
        (" H100 = 2.5 , A100=1.2 ", {"H100": 2.5, "A100": 1.2}),
        ("H100=1,h100=4", {"H100": 1.0, "h100": 4.0}),  # two types, as two jobs' gpu_type would be
    ],
)
def test_gpu_prices_keep_type_names_as_given(given, prices):
    assert parse_prices(given) == prices


@pytest.mark.parametrize(
    ("given", "where"),
    [
        ("H100=2.5,", "entry 2 of 2 in 'H100=2.5,'"),
        (",H100=2.5", "entry 1 of 2 in ',H100=2.5'"),
        ("H100=2.5, ,A100=1", "entry 2 of 3 in 'H100=2.5, ,A100=1'"),
    ],
)
def test_gpu_prices_refuse_an_empty_entry_naming_it(given, where):
    with pytest.raises(InvalidRequest) as refused:
        parse_prices(given)
    message = str(refused.value)
    assert message.startswith("--gpu-prices: expected TYPE=PRICE pairs such as H100=2.5,A100=1.2")
    assert f"got an empty entry ({where}" in message


def test_head_refuses_a_heartbeat_not_well_under_the_node_timeout(home, capsys):
    code, err = run_cli(["head", "--heartbeat-interval", "20"], capsys)
    assert code == 2
    assert "--heartbeat-interval: 20s" in err and "--node-timeout (10s)" in err


@pytest.mark.parametrize(
    "url",
    [
        "notaurl",
        "garbage://",
        "/tmp/x.db",
        "mysql://x@h/y",
        "sqlite://",
        "sqlite:////nonexistent/dir/x.db",
        "postgresql+psycopg://u@127.0.0.1:notaport/db",
    ],
)
@pytest.mark.parametrize("command", ["head", "up"])
def test_a_bad_db_url_is_refused_before_anything_exists(home, capsys, command, url):
    code, err = run_cli([command, "--db", url], capsys)
    assert code == 2, err
    assert "--db" in err and url in err
    assert "sqlite:///PATH" in err or "does not exist" in err
    assert not home.exists()  # nor local-cluster.json: a later plain `up` does not try it again


def test_an_unreachable_postgres_is_one_line_and_exit_3(home, capsys):
    pytest.importorskip("psycopg")
    code, err = run_cli(["head", "--db", "postgresql+psycopg://u:secret@127.0.0.1:1/db"], capsys)
    assert code == 3
    assert "--db: cannot connect" in err and "secret" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_relative_sqlite_path_is_under_corral_home_for_head_and_up(home, monkeypatch, tmp_path):
    import corral.head.main

    seen = {}
    monkeypatch.setattr(corral.head.main, "run", lambda settings: seen.setdefault("db", settings.db_url))
    monkeypatch.chdir(tmp_path)  # not CORRAL_HOME: the path must not depend on where the command runs
    main(["head", "--db", "sqlite:///rel.db"])
    assert seen["db"] == f"sqlite:///{home / 'rel.db'}"
    assert local._head_options("sqlite:///rel.db", None, None, None, None)["--db"] == seen["db"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--heartbeat-interval", "0"], "--heartbeat-interval"),
        (["--health-interval", "-1"], "--health-interval"),
        (["--labels", "a=b,a=c"], "'a' is given twice"),
        (["--labels", "a b=c"], "bad label key 'a b'"),
        (["--labels", "rack=r 1"], "--labels: bad value 'r 1' of label 'rack': a value holds letters, digits"),
        (["--labels", "rack="], "--labels: label 'rack' has no value"),
        (["--labels", "rack=r1,"], "--labels: expected key=value pairs such as rack=r1,nvlink=nv0, got an empty entry"),
        (["--fake-gpus", ""], "--fake-gpus"),
        (["--fake-gpus", "8xH100:0GB"], "GPU memory must be at least"),
        (["--fake-gpus", "100000xH100"], "at most 64"),
    ],
)
def test_agent_refuses_bad_values(home, capsys, args, named):
    code, err = run_cli(["agent", "--head", "http://127.0.0.1:1", "--token", "t", *args], capsys)
    assert code == 2, err
    assert named in err


@pytest.mark.parametrize("spec", ["", "8xH100:0GB", "65xH100", "9x8xH100:80GB"])
def test_up_refuses_bad_fake_gpus(home, capsys, spec):
    code, err = run_cli(["up", "--fake-gpus", spec], capsys)
    assert code == 2 and "--fake-gpus" in err


@pytest.mark.parametrize("command", [["head"], ["up"], ["status"], ["jobs"]])
def test_corral_home_that_is_a_file_is_bad_usage(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setattr(local, "spawn", lambda *a, **k: pytest.fail("nothing may start"))
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path / "afile"))
    code, err = run_cli(command, capsys)
    assert code == 2
    assert "CORRAL_HOME" in err and "not a directory" in err


def test_options_given_while_the_head_runs_are_saved_for_its_next_start(home, monkeypatch, capsys, locks):
    home.mkdir()
    pid = locks.hold(home / "head.lock")
    state = {"head": {"pid": pid, "port": 18001, "url": "http://127.0.0.1:18001", "db": None}}
    monkeypatch.setattr(local, "healthy", lambda url: True)
    asked = local._head_options("sqlite:///two.db", None, None, None, None)
    assert local._ensure_head(home, state, 18002, asked) == "http://127.0.0.1:18001"
    assert "saved for the head's next start" in capsys.readouterr().err
    assert state["head"]["next"] == {"port": 18002, "db": f"sqlite:///{home / 'two.db'}"}

    started: list[tuple[list[str], dict[str, str]]] = []
    locks.release(home / "head.lock")
    state["head"]["pid"] = None  # `corral down`
    monkeypatch.setattr(local, "spawn", lambda args, _log, _home, env=None: started.append((args, env)) or 4242)
    monkeypatch.setattr(local, "wait_head", lambda *a: None)
    monkeypatch.setattr(local, "port_free", lambda port: True)
    local._ensure_head(home, state, None, local._head_options(None, None, None, None, None))
    args, env = started[0]
    assert args[args.index("--port") + 1] == "18002"
    assert env == {"CORRAL_DB": f"sqlite:///{home / 'two.db'}"}
    assert "next" not in state["head"] and state["head"]["port"] == 18002
    assert json.loads((home / local.STATE_FILE).read_text())["head"]["port"] == 18002


def test_without_port_up_takes_the_previous_port_else_the_default_else_any(home, monkeypatch):
    home.mkdir()
    started: list[list[str]] = []
    monkeypatch.setattr(local, "spawn", lambda args, *_a: started.append(args) or 4242)
    monkeypatch.setattr(local, "wait_head", lambda *a: None)
    monkeypatch.setattr(local, "free_port", lambda: 40000)
    none = local._head_options(None, None, None, None, None)
    for taken, expected in [
        (set(), "18005"),
        ({18005}, str(local.DEFAULT_PORT)),
        ({18005, local.DEFAULT_PORT}, "40000"),
    ]:
        monkeypatch.setattr(local, "port_free", lambda port, taken=taken: port not in taken)
        local._ensure_head(home, {"head": {"pid": None, "port": 18005}}, None, none)
        assert started[-1][started[-1].index("--port") + 1] == expected


def test_an_empty_node_name_is_bad_usage(home, capsys):
    for command in ("drain", "undrain"):
        code, err = run_cli([command, ""], capsys)
        assert code == 2 and "NODE" in err


def test_a_malformed_corral_head_is_bad_usage_naming_it(home, monkeypatch, capsys):
    monkeypatch.setenv("CORRAL_HEAD", "garbage")
    code, err = run_cli(["status"], capsys)
    assert code == 2
    assert "CORRAL_HEAD" in err and "'garbage'" in err


def test_a_corrupt_client_config_is_named_not_missing(home, capsys):
    home.mkdir()
    (home / "client.json").write_text("{not json")
    code, err = run_cli(["status"], capsys)
    assert code == 2
    assert "corrupt" in err and str(home / "client.json") in err
    assert "no Corral head is configured" not in err


def test_help_says_where_agent_and_up_values_come_from(capsys):
    from click.testing import CliRunner

    from corral.cli.main import cli

    agent = " ".join(CliRunner().invoke(cli, ["agent", "--help"]).output.split())
    assert "CORRAL_HEAD" in agent and "CORRAL_JOIN_TOKEN" in agent
    up = " ".join(CliRunner().invoke(cli, ["up", "--help"]).output.split())
    assert "last `up`'s if free, else 8470 if free" in up
    assert "80GB each where no memory is given" in up


def test_the_head_reads_its_database_url_from_corral_db(home, monkeypatch):
    import corral.head.main

    seen = {}
    monkeypatch.setattr(corral.head.main, "run", lambda settings: seen.setdefault("db", settings.db_url))
    monkeypatch.setenv("CORRAL_DB", f"sqlite:///{home / 'from-env.db'}")
    main(["head"])
    assert seen["db"] == f"sqlite:///{home / 'from-env.db'}"


def test_up_keeps_the_database_url_off_the_heads_command_line_and_its_state_private(home, monkeypatch):
    class Spawned(Exception):
        pass

    started = {}

    def spawn(args, log_path, home_dir, secrets=None):
        started.update(args=args, secrets=secrets)
        raise Spawned

    monkeypatch.setattr(local, "spawn", spawn)
    home.mkdir()
    with pytest.raises(Spawned):
        main(["up", "--db", "sqlite:///private.db"])
    assert not any("private.db" in arg for arg in started["args"])
    assert started["secrets"] == {"CORRAL_DB": f"sqlite:///{home / 'private.db'}"}
    (home / local.STATE_FILE).write_text("{}")
    (home / local.STATE_FILE).chmod(0o644)  # as written before
    local._save_state(home, {"head": {"db": "postgresql+psycopg://u:secret@db/corral"}})
    assert (home / local.STATE_FILE).stat().st_mode & 0o777 == 0o600


def test_a_database_the_head_cannot_set_up_is_one_line_not_a_traceback(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.db"
    bad.write_text("not a database at all\n" * 10)
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
    args = [sys.executable, "-m", "corral", "head", "--port", "1", "--db", f"sqlite:///{bad}"]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "cannot create or update its tables in the --db database (file is not a database)" in result.stderr
    assert "Traceback" not in result.stderr and "listening" not in result.stderr


def test_a_saved_port_in_use_at_the_next_start_is_named_on_stderr(home, monkeypatch, capsys):
    import socket

    home.mkdir()
    started: list[list[str]] = []
    monkeypatch.setattr(local, "spawn", lambda args, *_a: started.append(args) or 4242)
    monkeypatch.setattr(local, "wait_head", lambda *a: None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        saved = taken.getsockname()[1]
        previous = local.free_port()
        state = {"head": {"pid": None, "port": previous, "next": {"port": saved}}}
        local._ensure_head(home, state, None, local._head_options(None, None, None, None, None))
    assert started[0][started[0].index("--port") + 1] == str(previous)
    assert f"port {saved}, saved by an earlier --port for this start, is in use; the head takes {previous}" in (
        capsys.readouterr().err
    )
