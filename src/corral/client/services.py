"""Service calls: create or update, list, show, scale, delete; and what gateways ask the head."""

from __future__ import annotations

from typing import Any

from corral.client.calls import Call, Transport, q


class ServiceApi:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def apply(self, spec: dict[str, Any]) -> Any:
        """Create the service, or update the one of that name (a rolling update if its template changed)."""
        return self.transport.send(Call("POST", "/v1/services", json=spec))

    def services(self) -> Any:
        return self.transport.send(Call("GET", "/v1/services"))

    def service(self, name: str) -> Any:
        return self.transport.send(Call("GET", f"/v1/services/{q(name, 'service')}"))

    def scale(self, name: str, replicas: int) -> Any:
        return self.transport.send(
            Call("POST", f"/v1/services/{q(name, 'service')}/scale", json={"replicas": replicas})
        )

    def delete(self, name: str) -> None:
        self.transport.send(Call("DELETE", f"/v1/services/{q(name, 'service')}"))

    def gateway_view(self) -> Any:
        return self.transport.send(Call("GET", "/v1/gateway/endpoints"))

    def report_load(self, gateway: str, services: dict[str, Any]) -> None:
        self.transport.send(Call("POST", "/v1/gateway/load", json={"gateway": gateway, "services": services}))
