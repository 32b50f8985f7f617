"""Every command answers --help, and the command list matches the modules that implement it."""

import pytest
from click.testing import CliRunner

from corral.cli.main import COMMANDS, cli

CONTRACT_COMMANDS = {
    "up",
    "down",
    "status",
    "config",
    "join-token",
    "head",
    "agent",
    "submit",
    "run",
    "jobs",
    "show",
    "logs",
    "wait",
    "cancel",
    "nodes",
}


def test_every_contract_command_exists():
    assert set(COMMANDS) >= CONTRACT_COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output


@pytest.mark.parametrize("name", ["status", "jobs", "show", "nodes", "submit", "run", "config", "cancel"])
def test_data_commands_take_output_json(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert "-o, --output [table|json]" in result.output


def test_top_level_help_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


@pytest.mark.parametrize("command", [["sim"], ["sim", "plan"]])
def test_sim_help_marks_the_trace_and_cluster_as_required(command):
    text = " ".join(CliRunner().invoke(cli, [*command, "--help"]).output.split())
    assert "gpu_type, …) [required]" in text and "gpu_speed table [required]" in text


def test_sim_help_names_the_out_folder_as_the_contract_does():
    text = " ".join(CliRunner().invoke(cli, ["sim", "--help"]).output.split())
    assert "--out DIR" in text and "DIRECTORY" not in text
