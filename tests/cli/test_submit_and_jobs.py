"""`corral submit --array` over a file's `array:`, a file's relative `workdir`, its command and env as written,
and the note `corral jobs --limit` prints."""

from __future__ import annotations

import os
from typing import Any

import pytest

import corral.cli.jobs
import corral.cli.serve
from corral.cli.main import main


class FakeHead:
    """Records what the commands send; answers like the head."""

    def __init__(self, jobs: int = 0) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.submitted: list[dict[str, Any]] = []
        self.rows = [{"id": f"j-{i}"} for i in range(jobs)]

    def submit_batch(self, specs: list[dict[str, Any]], idempotency_key: str | None = None) -> list[str]:
        assert idempotency_key, "an array is sent with an idempotency key, so that it can be sent again"
        self.batches.append(specs)
        return ["j-a", "j-b"]

    def submit(self, spec: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        self.submitted.append(spec)
        return {"id": "j-a"}

    def jobs(self, include_all: bool = False, states: Any = (), limit: int | None = None) -> list[dict[str, Any]]:
        return self.rows[:limit]


@pytest.fixture
def head(monkeypatch) -> FakeHead:
    fake = FakeHead(jobs=7)
    monkeypatch.setattr(corral.cli.jobs, "api", lambda: fake)
    return fake


def exit_code(args: list[str]) -> int | str | None:
    try:
        main(args)
    except SystemExit as ended:
        return ended.code
    return 0


def submit(tmp_path, capsys, text: str, *args: str) -> tuple[int | str | None, str, str]:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    code = exit_code(["submit", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_array_option_wins_over_the_files_with_a_note(head, tmp_path, capsys):
    code, out, err = submit(tmp_path, capsys, "command: x\narray: 0-3\n", "--array", "0-1")
    assert code == 0, err
    assert [spec["array"] for spec in head.batches[0]] == ["0-1"]
    assert err.strip() == "note: --array 0-1 replaces the file's array: 0-3"
    assert out.split() == ["j-a", "j-b"]


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("data/run", "{cwd}/data/run"),
        ("./run", "{cwd}/run"),
        ("../other", "{parent}/other"),
        ("/abs/dir", "/abs/dir"),
        ("~/runs", "{home}/runs"),
        (None, "{cwd}"),
    ],
)
def test_a_relative_workdir_is_resolved_against_where_submit_runs(head, tmp_path, capsys, monkeypatch, given, sent):
    """As sbatch resolves a relative --chdir: on the node, the path as written would be relative to the agent."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, _, err = submit(tmp_path, capsys, "command: x\n" + (f"workdir: {given}\n" if given else ""))
    assert code == 0, err
    cwd = os.getcwd()  # the directory as the system names it (tmp_path may lie under a symbolic link)
    home = os.path.expanduser("~")
    assert head.submitted[0]["workdir"] == sent.format(cwd=cwd, parent=os.path.dirname(cwd), home=home)


def test_a_services_relative_workdir_is_resolved_as_a_jobs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "web.yaml"
    path.write_text("kind: service\nname: web\ncommand: serve\nworkdir: app\n")
    assert corral.cli.serve._read_spec(str(path))["workdir"] == os.path.join(os.getcwd(), "app")


def test_submit_sends_command_arguments_and_env_values_as_written(head, tmp_path, capsys):
    code, _, err = submit(tmp_path, capsys, "command: [train, --seed, 010, --resume, yes]\nenv: {LR: 1.50, ON: on}\n")
    assert code == 0, err
    assert head.submitted[0]["command"] == ["train", "--seed", "010", "--resume", "yes"]
    assert head.submitted[0]["env"] == {"LR": "1.50", "ON": "on"}


def test_serve_sends_command_arguments_and_env_values_as_written(tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text("kind: service\nname: web\ncommand: [serve, --workers, 010]\nenv: {DEBUG: no}\n")
    sent = corral.cli.serve._read_spec(str(path))
    assert (sent["command"], sent["env"]) == (["serve", "--workers", "010"], {"DEBUG": "no"})


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("command: x\narray: 0-1\n", ["--array", "0-1"]),
        ("command: x\n", ["--array", "0-1"]),
        ("command: x\narray: 0-1\n", []),
    ],
)
def test_no_note_when_only_one_array_is_given_or_both_agree(head, tmp_path, capsys, text, args):
    code, _, err = submit(tmp_path, capsys, text, *args)
    assert code == 0, err
    assert [spec["array"] for spec in head.batches[0]] == ["0-1"]
    assert "note" not in err


def test_the_limit_note_says_the_list_stopped_at_the_limit(head, capsys):
    assert exit_code(["jobs", "--limit", "5", "-o", "json"]) == 0
    err = capsys.readouterr().err
    assert err.strip() == "note: showing the first 5 jobs (--limit 5); more may match"


def test_no_limit_note_when_fewer_jobs_match(head, capsys):
    assert exit_code(["jobs", "--limit", "8", "-o", "json"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("state", ["running", "Succeeded", "PENDING"])
def test_jobs_takes_a_state_in_any_case_and_sends_it_as_the_contract_writes_it(state, monkeypatch, capsys):
    sent: list[Any] = []

    class Head(FakeHead):
        def jobs(self, include_all: bool = False, states: Any = (), limit: int | None = None) -> list[dict[str, Any]]:
            sent.append(list(states))
            return []

    monkeypatch.setattr(corral.cli.jobs, "api", lambda: Head())
    assert exit_code(["jobs", "--state", state, "-o", "json"]) == 0
    assert sent == [[state.upper()]]


def test_a_bad_state_is_refused_naming_the_states_as_the_contract_writes_them(head, capsys):
    assert exit_code(["jobs", "--state", "done"]) == 2
    err = capsys.readouterr().err
    assert "'done' is not a job state; the states are PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMEOUT" in err
