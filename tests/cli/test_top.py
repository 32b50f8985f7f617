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
