"""Ship each rank's log file to the head in chunks, resuming where the head's copy ends."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from corral.client.agent_api import AgentApi
from corral.client.errors import ConflictError, CorralError

log = logging.getLogger(__name__)
CHUNK = 512 * 1024


@dataclass
class LogShipper:
    path: Path
    job_id: str
    generation: int
    rank: int
    offset: int = 0

    async def ship(self, api: AgentApi, node: str) -> bool:
        """Send what is new; True if everything written so far has reached the head."""
        while True:
            try:
                with self.path.open("rb") as handle:
                    handle.seek(self.offset)
                    data = handle.read(CHUNK)
            except FileNotFoundError:
                return True
            if not data:
                return True
            try:
                self.offset = await api.ship_logs(node, self.job_id, self.generation, self.rank, self.offset, data)
            except ConflictError:
                self.offset = 0  # the head lost part of its copy: send it all again
            except CorralError as exc:
                log.warning("could not ship logs of %s rank %d: %s", self.job_id, self.rank, exc)
                return False
