"""``corral checkpoint-done`` inside a job whose node cannot ask the head: the checkpoint file records it."""

import json
import os

import pytest

from corral.cli.main import main


def run(argv, capsys):
    try:
        main(argv)
        code = 0
    except SystemExit as ended:
        code = ended.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def job_without_client_config(tmp_path, monkeypatch):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path / "no-config"))
    monkeypatch.delenv("CORRAL_HEAD", raising=False)
    monkeypatch.delenv("CORRAL_TOKEN", raising=False)
    monkeypatch.setenv("CORRAL_JOB_ID", "j-7")
    monkeypatch.setenv("CORRAL_CHECKPOINT_DIR", str(checkpoints))
    return checkpoints


def test_inside_a_job_without_a_head_to_ask_it_touches_the_checkpoint_file(job_without_client_config, capsys):
    marker = job_without_client_config / ".corral-checkpoint"
    code, out, err = run(["checkpoint-done", "-o", "json"], capsys)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["id"] == "j-7" and answer["recorded_by"] == str(marker)
    assert answer["last_checkpoint_at"].endswith("Z")  # as the head's API writes times
    assert marker.exists()
    os.utime(marker, (1_000_000, 1_000_000))
    code, out, err = run(["checkpoint-done"], capsys)
    assert code == 0
    assert marker.stat().st_mtime > 1_000_000  # touched again
    assert "the agent reports it" in out and "the head was not asked" in err


def test_naming_a_job_still_needs_the_head(job_without_client_config, capsys):
    code, _, err = run(["checkpoint-done", "j-7"], capsys)
    assert code == 3
    assert "corral up" in err
    assert not (job_without_client_config / ".corral-checkpoint").exists()
