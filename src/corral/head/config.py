"""The head's cluster configuration (``corral head --config corral.yaml``): teams, quotas, priority
classes, queues and fair share. Re-read when the file changes or on request; a file that does not
validate is refused with the path of the bad field, and the head keeps the configuration it had.

An empty file (or one of comments only) is an empty configuration at start, but is refused when the
file is read again: a file caught half-written, or emptied by mistake, must not drop every team and
quota at once. ``{}`` in the file is an empty configuration on purpose, and is taken."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from corral.model import Quotas, TeamQuota
from corral.spec import ClusterConfig, FieldError, SpecError, load_yaml_document, parse_cluster_config

log = logging.getLogger(__name__)


def read_config(path: Path, *, allow_empty: bool = True) -> ClusterConfig:
    """Parse the file; ``SpecError`` names each bad field (the file's own problems included).

    Without ``allow_empty``, a file with no YAML document in it (empty, or comments only) is refused."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([FieldError("", f"cannot read config file {path}: {exc.strerror}")]) from None
    data = load_yaml_document(text, str(path))
    if data is None and not allow_empty:
        raise SpecError(
            [
                FieldError(
                    "",
                    f"the config file {path} is empty (or holds only comments); the config in force stays."
                    " Write its teams, quotas, priority classes or queues into it, or `{}` to clear them on purpose",
                )
            ]
        )
    return parse_cluster_config(data, str(path))


class ConfigHolder:
    """The configuration in force, and the file it came from (None: an empty configuration)."""

    def __init__(self, path: Path | None = None, config: ClusterConfig | None = None) -> None:
        self.path = path
        self.current = config or (read_config(path) if path is not None else ClusterConfig())
        self._mtime = self._stat()
        self._lock = threading.Lock()
        self.problem: str | None = None  # why the file as it is now was not taken, if it was not

    def reload(self) -> ClusterConfig:
        """Read the file again; on ``SpecError`` (an empty file included) the old configuration stays in force."""
        if self.path is None:
            return self.current
        with self._lock:
            mtime = self._stat()
            try:
                config = read_config(self.path, allow_empty=False)
            except SpecError as exc:
                self.problem = str(exc)
                raise
            self.current, self._mtime, self.problem = config, mtime, None
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
