"""ASGI middleware: a heartbeat that repeats its node's last one is answered before the API's routing.

At a few thousand nodes, heartbeats are most of the head's requests, and almost all of them repeat
the last one (``corral.head.quiet``). Answering those here skips the framework's middleware, routing
and dependency layers, about half the CPU time of a heartbeat. Anything else, a heartbeat that must
be handled in full, a bad body or token, any other request, goes on to the API unchanged, with the
body it sent.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral.api import HeartbeatRequest
from corral.head.runtime import HeadRuntime
from corral.head.services.agents import quiet_heartbeat

PREFIX, SUFFIX = "/v1/agents/", "/heartbeat"
MAX_BODY = 1 << 20


class QuietHeartbeats:
    def __init__(self, app: ASGIApp, rt: HeadRuntime) -> None:
        self.app = app
        self.rt = rt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] != "POST" or not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        node = path[len(PREFIX) : -len(SUFFIX)] if path.endswith(SUFFIX) else ""
        token = _bearer(scope)
        if not node or "/" in node or not token:
            await self.app(scope, receive, send)
            return
        # From its arrival until its answer leaves, the node's heartbeat is in the head's hands: however long
        # it waits (for a thread, for the database), the node is not silent (``corral.head.quiet``).
        known = self.rt.quiet.knows(node, token)
        if known:
            self.rt.quiet.arrived(node, self.rt.clock.now())
        try:
            await self._handle(scope, receive, send, node, token)
        finally:
            if known:
                self.rt.quiet.answered(node, self.rt.clock.now())

    async def _handle(self, scope: Scope, receive: Receive, send: Send, node: str, token: str) -> None:
        read = await _read(receive)
        if read is None:
            return  # the agent hung up
        body, complete = read
        answer = None
        if complete:
            try:
                answer = quiet_heartbeat(self.rt, node, token, HeartbeatRequest.model_validate_json(body))
            except ValidationError:
                answer = None  # the API answers with the field paths
        if answer is None:
            await self.app(scope, _replay(body, complete, receive), send)
            return
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


def _bearer(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


async def _read(receive: Receive) -> tuple[bytes, bool] | None:
    """The body, and whether it is all there (or only its first MAX_BODY bytes); None if the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > MAX_BODY:
            return b"".join(chunks), False


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A ``receive`` that hands over what was read, then whatever is left."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replayed
