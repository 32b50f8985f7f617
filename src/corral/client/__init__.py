"""Clients for the head API: the Python SDK (httpx), a light stdlib transport, the agents' API."""

from corral.client.calls import Call, HeadApi
from corral.client.config import ClientConfig, corral_home, load_config
from corral.client.errors import (
    ConflictError,
    CorralError,
    InvalidRequest,
    NotAllowedError,
    NotFoundError,
    Unreachable,
)

__all__ = [
    "Call",
    "ClientConfig",
    "ConflictError",
    "CorralError",
    "HeadApi",
    "InvalidRequest",
    "NotAllowedError",
    "NotFoundError",
    "Unreachable",
    "corral_home",
    "load_config",
]
