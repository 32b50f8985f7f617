"""`corral run` checks its options as a job spec before it sends anything to the head."""

import pytest

from corral.cli.main import main


@pytest.mark.parametrize("gpus", ["1e-9", "0.005", "1.5"])
def test_run_refuses_gpus_no_job_can_have_naming_the_field(gpus, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.setenv("CORRAL_HEAD", "http://127.0.0.1:9")  # never reached: the spec is refused first
    monkeypatch.setenv("CORRAL_TOKEN", "t")
    with pytest.raises(SystemExit) as ended:
        main(["run", "--gpus", gpus, "--", "true"])
    err = capsys.readouterr().err
    assert ended.value.code == 2, err
    said = "must be a whole number from 0 to 64 or a fraction from 0.01 to below 1"
    assert f"--gpus (resources.gpus): {said}" in err
