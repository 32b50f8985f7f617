"""The head's API as request descriptions, shared by every transport (sans-I/O)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import quote, urlencode


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    params: Sequence[tuple[str, str]] = ()
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def target(self) -> str:
        return self.path + ("?" + urlencode(list(self.params)) if self.params else "")


class Transport(Protocol):
    def send(self, call: Call) -> Any:
        """Perform the call; return the decoded JSON body or raise a CorralError."""
        ...

    def stream(self, call: Call) -> Iterator[bytes]:
        """Perform the call; yield the body as it arrives."""
        ...


NameKind = Literal["job", "node", "service", "token"]
NOT_FOUND: dict[NameKind, str] = {
    "job": "no job {!r}",
    "node": "no node {!r}",
    "service": "no service {!r}; `corral services` lists them",
    "token": "no token {!r} (see `corral token list`)",
}


def q(value: str, kind: NameKind) -> str:
    """A name (job id, node, service, token id) as one path segment. An empty one names nothing, and
    neither does one with a '/': the head decodes %2F before it routes, so the request would reach another
    route (or none). Both are answered here, as the head answers an unknown name. '.' and '..' are
    percent-encoded, or HTTP clients would resolve them as parts of the path."""
    from corral.client.errors import NotFoundError

    if not value:
        raise NotFoundError("no such name: an empty name ('') was given")
    if "/" in value:
        raise NotFoundError(NOT_FOUND[kind].format(value))
    return value.replace(".", "%2E") if value in (".", "..") else quote(value, safe="")


class HeadApi:
    """Typed-by-convention methods over any transport; results are plain JSON values."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def health(self) -> Any:
        return self.transport.send(Call("GET", "/healthz"))

    def submit(self, spec: dict[str, Any], idempotency_key: str | None = None) -> Any:
        if not idempotency_key:
            return self.transport.send(Call("POST", "/v1/jobs", json=spec))
        from corral.client.retry import send_repeatable  # a keyed submission is safe to repeat

        return send_repeatable(
            self.transport, Call("POST", "/v1/jobs", json=spec, headers={"Idempotency-Key": idempotency_key})
        )

    def submit_batch(self, specs: Sequence[dict[str, Any]], idempotency_key: str | None = None) -> list[str]:
        """Many jobs at once; with a key (a batch of one job, such as an array) sent again while unanswered."""
        if not idempotency_key:
            return list(self.transport.send(Call("POST", "/v1/jobs/batch", json={"jobs": list(specs)}))["ids"])
        from corral.client.retry import send_repeatable  # a keyed submission is safe to repeat

        call = Call("POST", "/v1/jobs/batch", json={"jobs": list(specs)}, headers={"Idempotency-Key": idempotency_key})
        return list(send_repeatable(self.transport, call)["ids"])

    def jobs(self, include_all: bool = False, states: Sequence[str] = (), limit: int | None = None) -> Any:
        params = [("all", "true")] if include_all else []
        params += [("state", s) for s in states]
        params += [("limit", str(limit))] if limit is not None else []
        return self.transport.send(Call("GET", "/v1/jobs", params=params))

    def job(self, job_id: str) -> Any:
        return self.transport.send(Call("GET", f"/v1/jobs/{q(job_id, 'job')}"))

    def cancel(self, job_ids: Sequence[str], whole_arrays: bool = False) -> Any:
        body: dict[str, Any] = {"ids": list(job_ids)}
        if whole_arrays:
            body["whole_arrays"] = True
        return self.transport.send(Call("POST", "/v1/jobs/cancel", json=body))

    def cluster_config(self) -> Any:
        return self.transport.send(Call("GET", "/v1/config"))

    def reload_cluster_config(self) -> Any:
        return self.transport.send(Call("POST", "/v1/config/reload"))

    def why(self, job_id: str) -> Any:
        return self.transport.send(Call("GET", f"/v1/jobs/{q(job_id, 'job')}/why"))

    def preempt(self, job_ids: Sequence[str]) -> Any:
        return self.transport.send(Call("POST", "/v1/jobs/preempt", json={"ids": list(job_ids)}))

    def checkpoint_done(self, job_id: str, at: str | None = None) -> Any:
        return self.transport.send(Call("POST", f"/v1/jobs/{q(job_id, 'job')}/checkpoint", json={"at": at}))

    def logs(self, job_id: str, rank: int = 0, follow: bool = False, offset: int = 0) -> Iterator[bytes]:
        params = [("rank", str(rank)), ("offset", str(offset))] + ([("follow", "true")] if follow else [])
        return self.transport.stream(Call("GET", f"/v1/jobs/{q(job_id, 'job')}/logs", params=params))

    def nodes(self) -> Any:
        return self.transport.send(Call("GET", "/v1/nodes"))

    def drain(self, node: str, reason: str = "") -> Any:
        return self.transport.send(Call("POST", f"/v1/nodes/{q(node, 'node')}/drain", json={"reason": reason}))

    def undrain(self, node: str) -> Any:
        return self.transport.send(Call("POST", f"/v1/nodes/{q(node, 'node')}/undrain"))

    def events(self, after: int = -1, limit: int = 100, job: str | None = None, wait_s: float = 0.0) -> Any:
        params = [("after", str(after)), ("limit", str(limit)), ("wait", str(wait_s))]
        params += [("job", job)] if job else []
        return self.transport.send(Call("GET", "/v1/events", params=params))

    def usage(self, by: str = "user", since: str | None = None, until: str | None = None) -> Any:
        params = [("by", by)] + [(k, v) for k, v in (("since", since), ("until", until)) if v]
        return self.transport.send(Call("GET", "/v1/usage", params=params))

    def status(self) -> Any:
        return self.transport.send(Call("GET", "/v1/status"))

    def join_token(self) -> str:
        return str(self.transport.send(Call("GET", "/v1/join-token"))["token"])

    def whoami(self) -> Any:
        return self.transport.send(Call("GET", "/v1/whoami"))

    def users(self) -> Any:
        return self.transport.send(Call("GET", "/v1/users"))

    def add_user(self, name: str, role: str | None = None, teams: Sequence[str] = ()) -> Any:
        """Add the user, or change an existing one's role and teams; what is left out stays as it is."""
        body: dict[str, Any] = {"name": name}
        if role is not None:
            body["role"] = role
        if teams:
            body["teams"] = list(teams)
        return self.transport.send(Call("POST", "/v1/users", json=body))

    def tokens(self) -> Any:
        return self.transport.send(Call("GET", "/v1/tokens"))

    def create_token(self, user: str | None = None, name: str = "") -> Any:
        return self.transport.send(Call("POST", "/v1/tokens", json={"user": user, "name": name}))

    def revoke_token(self, token_id: str) -> Any:
        return self.transport.send(Call("DELETE", f"/v1/tokens/{q(token_id, 'token')}"))
