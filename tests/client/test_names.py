"""Every name a command puts in a URL path reaches the head's own answer for an unknown name, whatever it
holds: a '/', dots, or characters that must be percent-encoded."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from corral.client import HeadApi, NotFoundError
from corral.client.light import LightTransport
from corral.client.sdk import HttpxTransport
from corral.client.services import ServiceApi

NAMES = ["a/b", "../x", "/", "..", ".", "x%2Fy", "a b", "a?b", "a#b", "ä"]


@pytest.fixture(params=["light", "httpx"])
def apis(request: pytest.FixtureRequest, live_head: Any) -> Iterator[tuple[HeadApi, ServiceApi]]:
    if request.param == "light":
        transport: Any = LightTransport(live_head.url, live_head.admin_token)
        yield HeadApi(transport), ServiceApi(transport)
    else:
        transport = HttpxTransport(live_head.url, live_head.admin_token)
        yield HeadApi(transport), ServiceApi(transport)
        transport.close()


def calls(api: HeadApi, services: ServiceApi) -> dict[str, tuple[Callable[[str], Any], str]]:
    """Each call that names something, and how the head says that it names nothing."""
    return {
        "job": (api.job, "no job {!r}"),
        "why": (api.why, "no job {!r}"),
        "checkpoint_done": (api.checkpoint_done, "no job {!r}"),
        "logs": (lambda name: b"".join(api.logs(name)), "no job {!r}"),
        "drain": (api.drain, "no node {!r}"),
        "undrain": (api.undrain, "no node {!r}"),
        "revoke_token": (api.revoke_token, "no token {!r} (see `corral token list`)"),
        "service": (services.service, "no service {!r}; `corral services` lists them"),
        "scale": (lambda name: services.scale(name, 1), "no service {!r}; `corral services` lists them"),
        "delete": (services.delete, "no service {!r}; `corral services` lists them"),
    }


@pytest.mark.parametrize("name", NAMES)
def test_an_unknown_name_is_not_found_with_the_heads_message(apis: tuple[HeadApi, ServiceApi], name: str) -> None:
    for what, (call, message) in calls(*apis).items():
        with pytest.raises(NotFoundError) as raised:
            call(name)
        assert str(raised.value) == message.format(name), what


def test_a_name_with_a_slash_never_reaches_another_route(apis: tuple[HeadApi, ServiceApi]) -> None:
    api, _ = apis
    job = api.submit({"command": "x"})
    try:
        for name in (f"{job['id']}/why", f"{job['id']}/logs", f"x/../{job['id']}"):
            with pytest.raises(NotFoundError, match=f"^no job {name!r}$"):
                api.job(name)
    finally:
        api.cancel([job["id"]])
