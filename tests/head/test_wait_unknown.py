"""`corral wait` against a head served over HTTP: unknown jobs exit 4, naming every one of them."""

from corral.cli.main import main


def wait(head, monkeypatch, capsys, *args):
    monkeypatch.setenv("CORRAL_HEAD", str(head.client.base_url).rstrip("/"))
    monkeypatch.setenv("CORRAL_TOKEN", head.admin_token)
    monkeypatch.setenv("CORRAL_HOME", str(head.home / "client"))
    capsys.readouterr()
    try:
        main(["wait", *args])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    return code, capsys.readouterr().err


def test_wait_names_every_unknown_job(served_head, monkeypatch, capsys):
    with served_head() as head:
        job_id = head.submit({"command": "true"})["id"]
        code, err = wait(head, monkeypatch, capsys, "j-nope1", job_id, "j-nope2", "--timeout", "5")
        assert (code, err) == (4, "error: no jobs 'j-nope1', 'j-nope2'\n")
        code, err = wait(head, monkeypatch, capsys, job_id, "j-nope1", "--timeout", "5")
        assert (code, err) == (4, "error: no job 'j-nope1'\n")
