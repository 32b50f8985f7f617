"""The frame `corral top` draws, from node and job objects."""

from rich.console import Console

from corral.cli.top import frame


def render(nodes, jobs) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(frame(nodes, jobs, "12:00:00"))
    return console.export_text()


def gpu(index, job=None, utilization=None, healthy=True):
    return {"index": index, "allocated_to": job, "utilization": utilization, "healthy": healthy}


def job(job_id, state, reason="", nodes=("n1",)):
    return {
        "id": job_id,
        "name": "train",
        "state": state,
        "user": "ada",
        "nodes": 1,
        "gpus_per_node": 1,
        "priority": 0,
        "submitted_at": "2026-01-01T00:00:00Z",
        "reason": reason,
        "allocation": [{"node": n} for n in nodes] if state == "RUNNING" else [],
    }


def test_nodes_show_one_mark_per_gpu_and_the_queue_says_why():
    nodes = [
        {"name": "n1", "state": "READY", "reason": "", "gpus": [gpu(0, "j-1", 100.0), gpu(1), gpu(2, healthy=False)]},
        {"name": "n2", "state": "NOT_READY", "reason": "no heartbeat for 12s", "gpus": [gpu(0)]},
    ]
    jobs = [job("j-1", "RUNNING"), job("j-2", "PENDING", "waiting for 2 free GPUs"), job("j-3", "SUCCEEDED")]
    text = render(nodes, jobs)
    assert "n1" in text and "█·✗" in text and "1/3" in text and "100%" in text
    assert "NOT_READY" in text and "no heartbeat for 12s" in text
    assert "waiting for 2 free GPUs" in text
    assert "j-3" not in text
    assert "1 running, 1 pending" in text


def test_names_and_reasons_are_shown_as_they_are_not_read_as_markup():
    nodes = [{"name": "n[1]", "state": "NOT_READY", "reason": "[/] lost", "gpus": [gpu(0)]}]
    pending = {**job("j-1", "PENDING", "waiting [bold]x"), "name": "[/]train", "user": "[red]ada"}
    text = render(nodes, [pending])
    for shown in ("n[1]", "[/] lost", "waiting [bold]x", "[/]train", "[red]ada"):
        assert shown in text


def test_piped_every_row_stays_whole_on_one_line(monkeypatch):
    from click.testing import CliRunner

    from corral.cli import top as top_module
    from corral.cli.main import cli

    reason = "waiting for 2 nodes with 4 free H100 GPUs each (none has that now); queue position 1 of 1; " * 2

    class Head:
        def nodes(self):
            return [{"name": "n1", "state": "READY", "reason": "", "gpus": [gpu(0)]}]

        def jobs(self):
            return [job("j-1", "PENDING", reason.strip())]

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(top_module, "api", lambda: Head())
    lines = CliRunner().invoke(cli, ["top", "--once"]).output.splitlines()
    assert any(line.rstrip().endswith(reason.strip()) for line in lines)  # not cut short with …
    assert "…" not in "".join(line for line in lines if "GPU:" not in line)
    legend = [line for line in lines if "unhealthy" in line]
    assert len(legend) == 1 and "running" in legend[0] and "utilization of an allocated GPU" in legend[0]
    assert all(len(line) < 400 for line in lines)  # one line each, not padded out to an endless width


def test_a_node_not_heard_from_shows_no_utilization_from_its_last_readings():
    nodes = [{"name": "n2", "state": "NOT_READY", "reason": "", "gpus": [gpu(0, "j-1", 89.0), gpu(1, None, 40.0)]}]
    text = render(nodes, [job("j-1", "RUNNING", nodes=("n2",))])
    row = next(line for line in text.splitlines() if line.strip().startswith("n2"))
    assert "89%" not in row and "64%" not in row and "▪·" in row
