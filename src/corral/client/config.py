"""Where the client finds the head and its token: environment, then CORRAL_HOME/client.json."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from corral.client.errors import Unreachable

CLIENT_CONFIG = "client.json"
HOW_TO_START = "start a local cluster with `corral up`, or set CORRAL_HEAD and CORRAL_TOKEN"


def head_urls(text: str) -> list[str]:
    """``http://h1:8470,http://h2:8470`` → each head's URL (several heads share one database)."""
    return [url.strip().rstrip("/") for url in text.split(",") if url.strip()]


def corral_home() -> Path:
    return Path(os.environ.get("CORRAL_HOME") or Path.home() / ".corral").expanduser().absolute()


@dataclass(frozen=True)
class ClientConfig:
    head_url: str  # one URL, or several separated by commas: the client fails over between them
    token: str


def read_config_file(home: Path | None = None) -> dict[str, str]:
    path = (home or corral_home()) / CLIENT_CONFIG
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError, PermissionError):
        return {}
    return {k: str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def load_config() -> ClientConfig:
    """The head URL and token to use; raises Unreachable if there is no head configured."""
    file = read_config_file()
    url = os.environ.get("CORRAL_HEAD") or file.get("head_url", "")
    token = os.environ.get("CORRAL_TOKEN") or file.get("token", "")
    if not url:
        raise Unreachable(f"no Corral head is configured: {HOW_TO_START}")
    return ClientConfig(head_url=url.rstrip("/"), token=token)
