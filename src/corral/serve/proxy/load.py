"""Request counters per service and per replica, and the load window the autoscaler reads.

The gateway inside the head counts here directly; a gateway running alone keeps its own book
and reports its counters to the head, which adds them to the head's. The requests each replica
holds tell the serve loop when a replica leaving the pool has finished its work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from corral.api.services import ServiceLoad
from corral.serve.autoscale import LoadSample

REMOTE_STALE_S = 5.0  # a gateway that has not reported for this long no longer counts


@dataclass
class Counters:
    inflight: int = 0
    requests: int = 0
    waiting: int = 0


def _ignore() -> None:
    return None


class LoadBook:
    def __init__(self, window_s: float = 3.0, on_waiting: Callable[[], object] = _ignore) -> None:
        self.window_s = window_s
        self.on_waiting: Callable[[], object] = on_waiting  # a request waits for a replica: decide soon
        self._local: dict[str, Counters] = {}
        self._replicas: dict[str, dict[str, int]] = {}  # service → replica → requests it holds
        self._remote: dict[str, tuple[float, dict[str, ServiceLoad]]] = {}
        self._history: dict[str, deque[LoadSample]] = {}
        self._last_total: dict[str, tuple[float, int]] = {}

    def counters(self, service: str) -> Counters:
        found = self._local.get(service)
        if found is None:
            found = self._local[service] = Counters()
        return found

    def started(self, service: str) -> None:
        c = self.counters(service)
        c.inflight += 1
        c.requests += 1

    def finished(self, service: str) -> None:
        self.counters(service).inflight -= 1

    def on_replica(self, service: str, replica: str, delta: int) -> None:
        """A request was sent to ``replica`` (+1), or its answer is over (-1)."""
        holding = self._replicas.setdefault(service, {})
        count = holding.get(replica, 0) + delta
        if count > 0:
            holding[replica] = count
        else:
            holding.pop(replica, None)

    def waiting(self, service: str, delta: int) -> None:
        self.counters(service).waiting += delta
        if delta > 0:
            self.on_waiting()

    def local_report(self) -> dict[str, ServiceLoad]:
        return {
            name: ServiceLoad(
                inflight=c.inflight, requests=c.requests, waiting=c.waiting, replicas=dict(self._replicas.get(name, {}))
            )
            for name, c in self._local.items()
        }

    def report(self, gateway: str, services: Mapping[str, ServiceLoad], now: float) -> None:
        """Another gateway's counters as of ``now``."""
        self._remote[gateway] = (now, dict(services))
        if any(s.waiting for s in services.values()):
            self.on_waiting()

    def replica_inflight(self, now: float) -> dict[str, int]:
        """Requests each replica holds now, from this gateway and every gateway that reported lately."""
        out: dict[str, int] = {}
        loads = [load.replicas for services in self._fresh_remote(now).values() for load in services.values()]
        for holding in [*self._replicas.values(), *loads]:
            for replica, count in holding.items():
                out[replica] = out.get(replica, 0) + count
        return out

    def _fresh_remote(self, now: float) -> dict[str, dict[str, ServiceLoad]]:
        for gateway, (at, _services) in list(self._remote.items()):
            if now - at > REMOTE_STALE_S:
                del self._remote[gateway]
        return {gateway: services for gateway, (_at, services) in self._remote.items()}

    def windows(self, now: float) -> dict[str, list[LoadSample]]:
        """Take a sample of every service's load now; each service's samples of the last window."""
        totals: dict[str, Counters] = {name: Counters(c.inflight, c.requests) for name, c in self._local.items()}
        for services in self._fresh_remote(now).values():
            for name, load in services.items():
                total = totals.setdefault(name, Counters())
                total.inflight += load.inflight
                total.requests += load.requests
        out = {}
        for name, total in totals.items():
            last_at, last_requests = self._last_total.get(name, (now, total.requests))
            elapsed = now - last_at
            rps = max(0, total.requests - last_requests) / elapsed if elapsed > 0 else 0.0
            self._last_total[name] = (now, total.requests)
            history = self._history.setdefault(name, deque())
            history.append(LoadSample(at=now, inflight=float(total.inflight), rps=rps))
            while history and now - history[0].at > self.window_s:
                history.popleft()
            out[name] = list(history)
        return out
