"""GPU prices over time: which prices were in force when, so that each stretch of a hold costs what
a GPU-hour cost then, and a later change of ``--gpu-prices`` does not rewrite past costs.

A head records its prices when it starts, if they differ from the last ones recorded (several heads
on one database should be given the same prices: the one started last sets them). The first prices
recorded also apply to everything held before them (a database from before prices were recorded).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from corral.head.runtime import HeadRuntime
from corral.head.store.tables import NodeRow, PriceRow

log = logging.getLogger(__name__)

Prices = Mapping[str, float]  # GPU type → price of one GPU-hour


def price_of(prices: Prices, gpu_type: str) -> float:
    """Price of one GPU-hour of ``gpu_type``, its name matched exactly, case included (as a job's ``gpu_type``
    matches the nodes' GPUs); types without a price cost nothing."""
    return prices.get(gpu_type, 0.0)


@dataclass(frozen=True)
class PriceBook:
    """The prices in force from each moment on, earliest first; the first apply from the beginning of time."""

    changes: tuple[tuple[datetime, Prices], ...]

    def cost(self, gpu_type: str, start: datetime, end: datetime, fraction: float = 1.0) -> float:
        """What ``fraction`` of one GPU of ``gpu_type`` costs from ``start`` to ``end``, each stretch at its price."""
        total = 0.0
        last = len(self.changes) - 1
        for at, (since, prices) in enumerate(self.changes):
            lo = start if at == 0 or start > since else since
            hi = end if at == last or end < self.changes[at + 1][0] else self.changes[at + 1][0]
            if hi > lo:
                total += (hi - lo).total_seconds() * fraction / 3600.0 * price_of(prices, gpu_type)
        return total


def load_prices(session: Session, current: Prices) -> PriceBook:
    """The recorded prices; ``current`` (this head's) when none are recorded yet."""
    rows = session.scalars(select(PriceRow).order_by(PriceRow.effective_at, PriceRow.id)).all()
    if not rows:
        return PriceBook(((datetime.min.replace(tzinfo=UTC), dict(current)),))
    return PriceBook(tuple((row.effective_at, {str(k): float(v) for k, v in row.prices.items()}) for row in rows))


def record_prices(session: Session, current: Prices, now: datetime) -> bool:
    """Record ``current`` as in force from ``now`` unless they are the last prices recorded; whether it did."""
    last = session.scalars(select(PriceRow).order_by(PriceRow.id.desc()).limit(1)).first()
    if last is not None and last.prices == dict(current):
        return False
    session.add(PriceRow(effective_at=now, prices=dict(current)))
    return True


def record_head_prices(rt: HeadRuntime) -> None:
    """On start: this head's ``--gpu-prices`` are in force from now, if they changed. A priced type that
    names the nodes' GPUs in another case only (``h100`` for ``H100``) is logged: it prices nothing."""
    with rt.write() as session:
        if record_prices(session, rt.settings.gpu_prices, rt.clock.now()):
            log.info("GPU prices in force from now: %s", dict(rt.settings.gpu_prices) or "none")
        types = {str(gpu["type"]) for gpus in session.scalars(select(NodeRow.gpus)) for gpu in gpus}
    for name, spelled in case_only_matches(rt.settings.gpu_prices, types).items():
        log.warning(
            "--gpu-prices prices %s, but the nodes' GPUs are %s: GPU types match exactly, case included;"
            " %s GPUs cost nothing until priced as %s",
            name,
            spelled,
            spelled,
            spelled,
        )


def case_only_matches(prices: Prices, gpu_types: Iterable[str]) -> dict[str, str]:
    """Each priced name that is not one of ``gpu_types`` but one of them in another case, with that type."""
    types = set(gpu_types)
    lowered = {gpu_type.lower(): gpu_type for gpu_type in sorted(types, reverse=True)}  # the first in order
    return {name: lowered[name.lower()] for name in prices if name not in types and name.lower() in lowered}
