"""The client a command uses: the light transport, configured from the environment."""

from __future__ import annotations

from corral.client.calls import HeadApi
from corral.client.config import load_config
from corral.client.light import LightTransport


def api(timeout_s: float = 30.0) -> HeadApi:
    config = load_config()
    return HeadApi(LightTransport(config.head_url, config.token, timeout_s))
