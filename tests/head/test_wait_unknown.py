"""`corral wait` against a head served over HTTP: unknown jobs exit 4, naming every one of them."""

from .conftest import run_cli


def wait(head, monkeypatch, capsys, *args):
    code, _, err = run_cli(head, monkeypatch, capsys, "wait", *args)
    return code, err


def test_wait_names_every_unknown_job(served_head, monkeypatch, capsys):
    with served_head() as head:
        job_id = head.submit({"command": "true"})["id"]
        code, err = wait(head, monkeypatch, capsys, "j-nope1", job_id, "j-nope2", "--timeout", "5")
        assert (code, err) == (4, "error: no jobs 'j-nope1', 'j-nope2'\n")
        code, err = wait(head, monkeypatch, capsys, job_id, "j-nope1", "--timeout", "5")
        assert (code, err) == (4, "error: no job 'j-nope1'\n")
