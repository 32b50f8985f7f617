"""`corral head --ssl-certfile --ssl-keyfile` serves HTTPS; clients trust it through SSL_CERT_FILE."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from corral.client.calls import HeadApi
from corral.client.errors import Unreachable
from corral.client.light import LightTransport
from corral.testing.net import free_port


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test certificate")
def test_the_head_serves_https(tmp_path, monkeypatch):
    cert, key = tmp_path / "head.pem", tmp_path / "head.key"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
    subprocess.run(
        [*request, "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    port = free_port()
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
    args = ["head", "--port", str(port), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    with open(tmp_path / "head.log", "ab") as log:
        head = subprocess.Popen([sys.executable, "-m", "corral", *args], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        api = HeadApi(LightTransport(f"https://127.0.0.1:{port}", timeout_s=5))
        deadline = time.monotonic() + 30
        while True:
            try:
                assert api.health()["status"] == "ok"
                break
            except Exception:
                if time.monotonic() > deadline or head.poll() is not None:
                    raise
                time.sleep(0.2)
        config = (tmp_path / "home" / "client.json").read_text()
        assert f'"head_url": "https://127.0.0.1:{port}"' in config
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(Unreachable) as untrusted:
            HeadApi(LightTransport(f"https://127.0.0.1:{port}", timeout_s=5)).health()
        assert "point SSL_CERT_FILE at its certificate" in str(untrusted.value)
    finally:
        head.send_signal(signal.SIGTERM)
        head.wait(timeout=15)


def test_a_certificate_without_its_key_exits_2(tmp_path):
    cert = tmp_path / "head.pem"
    cert.write_text("not really")
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [sys.executable, "-m", "corral", "head", "--ssl-certfile", str(cert)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--ssl-keyfile" in result.stderr


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is needed to make a test certificate")
def test_a_certificate_and_a_key_that_do_not_belong_together_exit_2_before_anything_starts(tmp_path):
    made = {}
    for name in ("one", "two"):
        cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
        request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=x"]
        subprocess.run([*request, "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
        made[name] = (cert, key)
    env = {**os.environ, "CORRAL_HOME": str(tmp_path / "home")}
    for cert, key in ((made["one"][0], made["two"][1]), (made["one"][1], made["one"][0])):  # mismatched; swapped
        args = ["head", "--port", str(free_port()), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
        result = subprocess.run(
            [sys.executable, "-m", "corral", *args], capture_output=True, text=True, env=env, timeout=60
        )
        assert result.returncode == 2, result.stderr
        assert "--ssl-certfile and --ssl-keyfile" in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "home" / "corral.db").exists()  # nothing started
