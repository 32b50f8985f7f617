"""The head's cluster configuration (``corral head --config corral.yaml``): teams, quotas, priority
classes, queues and fair share. Re-read when the file changes or on request; a file that does not
validate is refused with the path of the bad field, and the head keeps the configuration it had."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from corral.model import Quotas, TeamQuota
from corral.spec import ClusterConfig, FieldError, SpecError, load_cluster_config_yaml

log = logging.getLogger(__name__)


def read_config(path: Path) -> ClusterConfig:
    """Parse the file; ``SpecError`` names each bad field (the file's own problems included)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([FieldError("", f"cannot read config file {path}: {exc.strerror}")]) from None
    return load_cluster_config_yaml(text, source=str(path))


class ConfigHolder:
    """The configuration in force, and the file it came from (None: an empty configuration)."""

    def __init__(self, path: Path | None = None, config: ClusterConfig | None = None) -> None:
        self.path = path
        self.current = config or (read_config(path) if path is not None else ClusterConfig())
        self._mtime = self._stat()
        self._lock = threading.Lock()

    def reload(self) -> ClusterConfig:
        """Read the file again; on ``SpecError`` the old configuration stays in force."""
        if self.path is None:
            return self.current
        with self._lock:
            mtime = self._stat()
            config = read_config(self.path)
            self.current, self._mtime = config, mtime
        log.info("loaded the cluster config from %s", self.path)
        return config

    def reload_if_changed(self) -> None:
        """Cheap check (one stat) for the scheduling loop; a bad new file is logged and ignored until it changes."""
        if self.path is None or self._stat() == self._mtime:
            return
        try:
            self.reload()
        except SpecError as exc:
            self._mtime = self._stat()
            log.error("ignoring the changed config file %s, keeping the old one: %s", self.path, exc)

    def _stat(self) -> float | None:
        try:
            return self.path.stat().st_mtime if self.path is not None else None
        except OSError:
            return None


def quotas_of(config: ClusterConfig) -> Quotas:
    """The scheduler's quota table from the config's teams."""
    return {
        name: {
            gpu_type: TeamQuota(q.nominal, q.borrowing_limit, q.lending_limit) for gpu_type, q in team.quotas.items()
        }
        for name, team in config.teams.items()
        if team.quotas
    }


def team_parents_of(config: ClusterConfig) -> dict[str, str]:
    """Each team's parent team, for the scheduler; teams directly under the organisation are left out."""
    return {name: team.parent for name, team in config.teams.items() if team.parent is not None}
