"""`corral acct -o csv` against a head served over HTTP: small figures print as plain decimals."""

import csv
import io

from .conftest import run_cli


def acct(head, monkeypatch, capsys, *args):
    code, out, err = run_cli(head, monkeypatch, capsys, "acct", *args)
    assert code == 0, err
    return out


def test_a_tenth_of_a_gpu_second_prints_as_plain_decimals(served_head, monkeypatch, capsys):
    with served_head(gpu_prices={"H100": 2.5}) as head:
        agent = head.register("n1", gpus=1)
        job_id = head.submit({"command": "blink", "resources": {"gpus": 1}})["id"]
        assert head.cycle().placed == 1
        [task] = agent.tasks()
        agent.beat([head.running(task)])
        head.clock.advance(0.1)
        agent.beat([head.exited(task, 0)])
        [row] = head.client.get("/v1/usage", params={"by": "job"}, headers=head.admin).json()["rows"]
        # 0.1 GPU-second: 2.8e-05 GPU-hours at 2.5 an hour costs 6.9e-05 (JSON numbers, as JSON writes them)
        assert (row["gpu_hours"], row["cost"]) == (2.8e-05, 6.9e-05)

        text = acct(head, monkeypatch, capsys, "--by", "job", "-o", "csv")
    assert text.splitlines() == [
        "key,jobs,gpu_seconds,gpu_hours,cost,energy_kwh",
        f"{job_id},1,0.1,0.000028,0.000069,0.0",
    ]
    [read] = csv.DictReader(io.StringIO(text))
    assert (float(read["gpu_hours"]), float(read["cost"])) == (row["gpu_hours"], row["cost"])
