"""Hosts on one machine: network namespaces joined by a bridge, with links a test can cut.

``Network.create()`` makes a bridge in the current namespace holding the first address of a
private /24; ``add_host(name)`` makes a namespace with one veth link to the bridge and the next
address. ``cut(name)``/``heal(name)`` take that link down and up: the far side's packets are lost,
as in a real partition (connections time out, nothing is refused). Everything is deleted by
``close()``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    probe = f"crl-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except FileNotFoundError:
        return "the `ip` command (iproute2) is missing"
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` was refused: {exc.stderr.decode(errors='replace').strip()}"
    _ip("netns", "del", probe)
    return None


@dataclass
class Network:
    tag: str
    subnet: str  # the first three octets, e.g. "10.201.7"
    hosts: dict[str, str] = field(default_factory=dict)  # name → namespace
    addresses: dict[str, str] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"crlbr{self.tag}"

    @property
    def gateway(self) -> str:
        """The bridge's address: where the hosts reach this namespace."""
        return f"{self.subnet}.1"

    @classmethod
    def create(cls, subnet: str | None = None) -> Network:
        tag = f"{os.getpid() % 100000}"
        network = cls(tag=tag, subnet=subnet or f"10.201.{os.getpid() % 250 + 1}")
        _ip("link", "add", network.bridge, "type", "bridge")
        _ip("addr", "add", f"{network.gateway}/24", "dev", network.bridge)
        _ip("link", "set", network.bridge, "up")
        return network

    def add_host(self, name: str) -> str:
        """A namespace for ``name`` linked to the bridge; its address."""
        index = len(self.hosts) + 1
        namespace, outside = f"crl{self.tag}-{name}", f"crl{self.tag}v{index}"
        address = f"{self.subnet}.{index + 10}"
        _ip("netns", "add", namespace)
        self.hosts[name] = namespace
        _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("link", "set", outside, "master", self.bridge, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        self.addresses[name] = address
        return address

    def run_in(self, name: str) -> list[str]:
        """The command prefix that runs a program inside ``name``'s namespace."""
        return ["ip", "netns", "exec", self.hosts[name]]

    def cut(self, name: str) -> None:
        _ip("-n", self.hosts[name], "link", "set", "eth0", "down")

    def heal(self, name: str) -> None:
        _ip("-n", self.hosts[name], "link", "set", "eth0", "up")

    def close(self) -> None:
        for namespace in self.hosts.values():
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=10, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=10, check=False)
        self.hosts.clear()
