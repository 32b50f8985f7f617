"""Tables print every value as it is, one line per row when stdout is not a terminal."""

from corral.cli.jobs import _show_table
from corral.cli.render import duration, figure, styled_state, table
from corral.cli.why import _why_table


def test_values_that_look_like_markup_are_printed_verbatim(capsys):
    table("[b]title", ["[COL]"], [["[/] [bold]x"], ["[red]y[/]"], [None]])
    out = capsys.readouterr().out
    assert "[b]title" in out and "[COL]" in out
    assert "[/] [bold]x" in out and "[red]y[/]" in out


def test_a_state_is_styled_not_printed_as_markup(capsys):
    table(None, ["STATE"], [[styled_state("PENDING")], [styled_state("[odd]")]])
    out = capsys.readouterr().out
    assert "PENDING" in out and "[yellow]" not in out and "[/]" not in out
    assert "[odd]" in out  # an unknown state is shown as it is


def test_rows_are_not_folded_when_stdout_is_not_a_terminal(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    long = "x" * 300
    table(None, ["ID", "REASON"], [["j-123456789", long]])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and long in lines[1]


def test_a_title_wider_than_its_table_stays_on_one_line_when_stdout_is_not_a_terminal(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    title = "usage by team, the beginning → 2026-11-25T07:00:00.305419Z"
    table(title, ["TEAM", "JOBS"], [["a", 1]])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == title and len(lines) == 3


def test_columns_still_sets_the_width(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    table(None, ["ID", "REASON"], [["j-1", "x" * 300]])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 2 and all(len(line) <= 60 for line in lines)


def show_job(**changes):
    job = {
        "id": "j-1",
        "name": "n",
        "state": "RUNNING",
        "user": "u",
        "team": "t",
        "priority": 0,
        "nodes": 1,
        "gpus_per_node": 1,
        "gpu_types": [],
        "command": "sh -c 'echo \"[/] [bold]x\"'",
        "submitted_at": None,
        "restarts": 0,
        "allocation": [],
    }
    return {**job, **changes}


def test_show_prints_a_command_with_brackets_as_it_is(capsys):
    _show_table(show_job())
    assert "sh -c 'echo \"[/] [bold]x\"'" in capsys.readouterr().out


def test_show_prints_a_jobs_array_and_dependencies(capsys):
    _show_table(show_job(array_id="j-0", array_index=3, after_ok=["j-a", "j-b"], after_any=["j-c"]))
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split() == ["array", "element", "3", "of", "array", "j-0"] for line in lines)
    assert any(line.split() == ["after_ok", "j-a,", "j-b"] for line in lines)
    assert any(line.split() == ["after_any", "j-c"] for line in lines)


def test_shows_task_table_names_its_rank_column_the_node_rank(capsys):
    """Under one process per GPU a task's processes have ranks of their own: the column is the node's."""
    task = {"node_rank": 1, "generation": 2, "node": "n2", "state": "RUNNING", "exit_code": None, "detail": ""}
    _show_table(show_job(tasks=[task]))
    header = next(line for line in capsys.readouterr().out.splitlines() if "ATTEMPT" in line)
    assert header.split()[:3] == ["NODE", "RANK", "ATTEMPT"]


def test_show_leaves_out_array_and_dependency_rows_a_job_does_not_have(capsys):
    _show_table(show_job(array_id=None, array_index=None, after_ok=[], after_any=[]))
    out = capsys.readouterr().out
    assert "array" not in out and "after_" not in out


def test_why_prints_the_state_without_markup(capsys):
    _why_table({"job_id": "j-1", "state": "PENDING", "reason": "waiting [x]", "nodes_needed": 1, "groups": []})
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "j-1 PENDING: waiting [x]"


def test_why_says_when_a_job_is_not_waiting(capsys):
    _why_table({"job_id": "j-1", "state": "RUNNING", "reason": "running on n1", "nodes_needed": 1, "groups": []})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "it is not waiting; below, where it would fit now if it were submitted again"


def test_cluster_config_says_when_the_file_does_not_validate(capsys):
    from corral.cli.clusterconfig import _config_table

    config = {"organisation": "org", "teams": {}, "priority_classes": {}, "queues": {}}
    _config_table({"path": "/etc/corral.yaml", "config": config, "problem": "teams.a.parent: unknown team 'b'"})
    err = capsys.readouterr().err
    assert "does not validate; the config below stays in force: teams.a.parent: unknown team 'b'" in err


def test_durations_never_show_60_seconds_or_minutes() -> None:
    assert [duration(s) for s in (59.4, 59.6, 119.6, 3599.6, 7260.0)] == ["59s", "1m00s", "2m00s", "1h00m", "2h01m"]


def test_a_small_figure_is_not_shown_as_zero():
    """A job of a few seconds holds a few thousandths of a GPU-hour: 0.00 would read as nothing used."""
    assert [figure(v) for v in (0.0, 2.8e-05, 0.0014, 0.004, 0.017, 1.5, 1234.567)] == [
        "0.00",
        "0.000028",
        "0.0014",
        "0.004",
        "0.02",
        "1.50",
        "1234.57",
    ]
    assert figure(0.0004, 3) == "0.0004" and figure(0.017, 3) == "0.017"
