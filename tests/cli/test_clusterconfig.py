"""`corral cluster-config`'s tables: every team with its members by name, fair share and GPU speeds."""

from __future__ import annotations

from corral.cli.clusterconfig import _config_table, _members_text
from corral.spec import load_cluster_config_yaml

CONFIG = """
organisation: acme
teams:
  vision: {members: [alice, carol], quotas: {H100: {nominal: 16, borrowing_limit: 4}, A100: {nominal: 2}}}
  ops: {members: [dave]}
priority_classes:
  prod: {value: 100}
  spot: {value: 0, preemptible: true}
default_priority_class: spot
fair_share: {half_life: 3d, weights: {vision: 2}}
gpu_speed: {H100: 1.0, L4: 0.25}
"""


def shown(capsys, text: str = CONFIG) -> list[list[str]]:
    config = load_cluster_config_yaml(text).model_dump(mode="json", by_alias=True)
    _config_table({"path": "corral.yaml", "config": config})
    return [line.split() for line in capsys.readouterr().out.splitlines()]


def test_members_are_named_once_per_team_and_teams_without_quotas_are_listed(capsys):
    lines = shown(capsys)
    assert ["vision", "acme", "A100", "2", "-", "-", "alice,", "carol"] in lines
    assert ["vision", "acme", "H100", "16", "4", "-"] in lines  # the team's second row: members already named
    assert ["ops", "acme", "-", "-", "-", "-", "dave"] in lines


def test_fair_share_and_gpu_speeds_are_shown(capsys):
    lines = shown(capsys)
    assert ["fair", "share", "(usage", "half-life", "3d00h)"] in lines
    assert ["vision", "2"] in lines and ["(other", "teams)", "1"] in lines
    assert ["L4", "0.25"] in lines and ["(other", "types)", "1"] in lines
    assert ["priority", "classes", "(default:", "spot)"] in lines


def test_without_speeds_there_is_no_speed_table(capsys):
    lines = shown(capsys, "teams: {a: {}}")
    assert not any(line[:2] == ["GPU", "speeds"] for line in lines)
    assert ["fair", "share", "(usage", "half-life", "7d00h)"] in lines


def test_many_members_are_shortened_with_how_many_more():
    names = [f"user{i:02d}" for i in range(30)]
    text = _members_text(names)
    assert text.startswith("user00, user01, ") and text.endswith(" more")
    assert len(text) <= 40
    shown_count = text.count(",") + 1
    assert text.endswith(f" and {30 - shown_count} more")
    assert _members_text([]) == "-"
    assert _members_text(["x" * 60]) == "x" * 60
