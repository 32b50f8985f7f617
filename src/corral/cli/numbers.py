"""Number options: ranges that refuse NaN and infinity too."""

from __future__ import annotations

import math
import re
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that refuses ``nan`` and ``inf`` too: NaN compares false with both bounds, so a
    range alone lets it through (a wait with ``--timeout nan`` would never time out)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class PlainIntRange(click.IntRange):
    """``click.IntRange`` that takes only ASCII digits (and a sign): ``int()`` also takes ``1_000`` and the
    digits of other scripts. With ``rule``, a number out of range is refused in those words rather than
    click's (``-1 is not in the range x>=0``)."""

    def __init__(self, *args: Any, rule: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rule = rule

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
            self.fail(f"{value!r} is not a whole number written with the digits 0-9.", param, ctx)
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            if self.rule is None:
                raise
            self.fail(f"{str(value).strip()}: {self.rule}", param, ctx)


class FiniteFloat(click.ParamType[float, object]):
    """A finite number from ``low`` to ``high``; the error names the option and the range."""

    name = "number"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = float(low), float(high)

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        from corral.sim.trace import plain_float

        try:
            number = plain_float(str(value))
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if not (math.isfinite(number) and self.low <= number <= self.high):
            low, high = _plain(self.low), _plain(self.high)
            self.fail(f"{value!r}: expected a finite number at least {low} and at most {high}", param, ctx)
        return number


def _plain(number: float) -> str:
    """``0.000001`` and ``3,153,600,000`` rather than ``1e-06`` and ``3.1536e+09``."""
    return f"{int(number):,}" if number.is_integer() else f"{number:f}".rstrip("0")
