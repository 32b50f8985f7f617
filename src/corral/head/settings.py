"""The head's settings, from command-line options and defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class HeadSettings:
    home: Path
    db_url: str
    host: str = "127.0.0.1"
    port: int = 8470
    public_url: str = ""  # what clients should use; derived from host/port when empty
    heartbeat_interval_s: float = 2.0
    node_timeout_s: float = 10.0
    agent_lease_s: float = 15.0
    grace_s: float = 10.0  # SIGTERM → SIGKILL on cancel and gang teardown, unless the job sets its own
    preempt_grace_s: float = 30.0  # the same on preemption and time limits, so the job can checkpoint
    schedule_interval_s: float = 1.0
    policy: str = "default"
    checkpoint_root: Path | None = None
    config_path: Path | None = None  # the cluster config (teams, quotas, priority classes, queues)
    write_client_config: bool = True
    ssl_certfile: Path | None = None  # with ssl_keyfile: serve HTTPS
    ssl_keyfile: Path | None = None
    # Accounting and idle GPUs (docs/observability.md).
    gpu_prices: dict[str, float] = field(default_factory=dict)  # per GPU-hour, by GPU type
    meter_interval_s: float = 30.0  # how often GPU energy is integrated and stored
    idle_after_s: float | None = 1800.0  # flag jobs whose GPUs stay under 5 % this long; None: never
    idle_action: str = "flag"  # "flag", or "cancel": warn, then cancel after idle_grace_s
    idle_grace_s: float = 900.0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        scheme = "https" if self.ssl_certfile else "http"
        return f"{scheme}://{host}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs" / "jobs"

    @property
    def checkpoints(self) -> Path:
        return self.checkpoint_root or (self.home / "checkpoints")
