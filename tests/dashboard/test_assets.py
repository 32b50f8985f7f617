"""The dashboard's assets ship in the package and name nothing outside the head; `corral dashboard`."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

import corral.head
from corral.cli.main import cli

ASSETS = Path(corral.head.__file__).parent / "dashboard"


def test_the_page_and_its_assets_are_served_and_nothing_comes_from_elsewhere(served):
    page = served.http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("favicon.svg", "image/svg+xml")):
        response = served.http.get(f"/ui/{name}")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(kind)
    assert served.http.get("/ui/../settings.py").status_code == 404
    assert served.http.get("/ui/secret.txt").status_code == 404
    for asset in ASSETS.iterdir():
        text = asset.read_text()
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), f"{asset.name} loads from elsewhere"
        assert "http://www.w3.org/2000/svg" in text or "://" not in text, f"{asset.name} names a URL"


def test_job_gpus_need_a_token_and_hide_other_users_jobs(served):
    served.register("n1")
    job_id = served.submit({"command": "x", "resources": {"gpus": 2}})
    served.cycle()
    served.beat(served.nodes["n1"])
    assert served.http.get(f"/v1/jobs/{job_id}/gpus").status_code == 401
    mine = served.http.get(f"/v1/jobs/{job_id}/gpus", headers=served.headers()).json()
    assert [(g["node"], g["index"], len(g["points"])) for g in mine["gpus"]] == [("n1", 0, 1), ("n1", 1, 1)]
    other = served.http.get(f"/v1/jobs/{job_id}/gpus", headers=served.headers(served.user_token("bob")))
    assert other.status_code == 404


def test_corral_dashboard_prints_a_signed_in_link(served):
    env = {"CORRAL_HEAD": served.url, "CORRAL_TOKEN": "cu_a/b+c"}
    result = CliRunner().invoke(cli, ["dashboard"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"{served.url}/#token=cu_a%2Fb%2Bc"
    bare = CliRunner().invoke(cli, ["dashboard", "--no-token"], env=env)
    assert bare.output.strip() == f"{served.url}/"
