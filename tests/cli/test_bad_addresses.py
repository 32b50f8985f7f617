"""Ports and head URLs that cannot be used are refused with the option named, never a traceback."""

import pytest

from corral.cli.main import main


def exit_code(argv, capsys):
    with pytest.raises(SystemExit) as ended:
        main(argv)
    return ended.value.code, capsys.readouterr().err


@pytest.mark.parametrize("command", [["up", "--agents", "0"], ["head"], ["gateway", "--head", "http://h:1"]])
@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_a_port_out_of_range_is_bad_usage(command, port, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    code, err = exit_code([*command, "--port", port], capsys)
    assert code == 2
    assert "--port" in err and "65535" in err


@pytest.mark.parametrize("url", ["http://localhost:99999", "http://localhost:abc", "http://[::1", "ftp://h:1"])
def test_an_agent_refuses_a_head_url_it_cannot_use(url, capsys):
    code, err = exit_code(["agent", "--head", f"http://ok:1,{url}", "--token", "t"], capsys)
    assert code == 2
    assert "--head" in err and url in err and "http://HOST:PORT" in err


@pytest.mark.parametrize("url", ["http://localhost:99999", "http://localhost:abc", "http://[::1"])
def test_a_client_names_a_head_url_it_cannot_use(url, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.setenv("CORRAL_HEAD", url)
    code, err = exit_code(["status"], capsys)
    assert code == 2  # bad usage: the variable names no usable URL
    assert f"bad head URL {url!r}" in err and "CORRAL_HEAD" in err


@pytest.mark.parametrize("value", ["http://h:1,", ",http://h:1", "http://h:1,,http://h:2"])
def test_an_empty_entry_in_a_list_of_head_urls_is_named_as_such(value, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    monkeypatch.setenv("CORRAL_HEAD", value)
    code, err = exit_code(["status"], capsys)
    assert code == 2
    assert "CORRAL_HEAD: an empty entry (a comma at the start or the end, or two in a row)" in err
    code, err = exit_code(["agent", "--head", value, "--token", "t"], capsys)
    assert code == 2 and "an empty entry" in err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--head", "http://h:1/path", "--token", "t"], "--head"),
        (["--head", "http://h:1", "--token", "k\u043bey"], "--token"),
        (["--head", "http://h:1", "--token", "a\nb"], "--token"),
    ],
)
def test_a_gateway_refuses_a_head_url_or_token_it_cannot_use(args, named, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_HOME", str(tmp_path))
    code, err = exit_code(["gateway", *args], capsys)
    assert code == 2
    assert named in err
