"""Pydantic's errors in the project's words: what the field must be, with its limits, and what was given.

``phrase`` maps an error's type to a sentence such as ``must be a whole number from 1 to 4,096, got 0``.
The limits come from the field itself where it can be found (both ends of its range, even where only one
was crossed), else from the error's own context. Types not listed keep pydantic's message.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from corral.spec.names import LABEL_PATTERN, LABEL_RULE, USER_NAME_PATTERN, USER_NAME_RULE

_WHOLE = {"int_type", "int_parsing", "int_from_float", "int_parsing_size"}
_NUMBER = {"float_type", "float_parsing", "finite_number"}
_BOUNDS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


_LONGEST_SHOWN = 60  # characters of a text shown in full; a longer one (a whole file read as one string) is cut


def shown(value: Any) -> str:
    """A given value for a message, as YAML would write it: ``null``, ``true``, ``'abc'``, ``1.5``, ``a list``;
    a long text by its start and length (``'job_id,submit_time_s,…'… (414,702 characters)``)."""
    if isinstance(value, str) and len(value) > _LONGEST_SHOWN:
        return f"{value[:_LONGEST_SHOWN]!r}… ({len(value):,} characters)"
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))  # 100000, as written, where a check before made it a float
    if isinstance(value, int | float | str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def written(value: Any) -> str:
    """A given value in full, as YAML would write its scalars: ``true``, ``nothing``, ``'abc'``, ``[1, 2]``."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value)


def first_repeat(items: list[str]) -> str | None:
    """The first item given a second time, for a message that names it (``lists H100 twice``)."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def _number(value: Any) -> str:
    """A limit as people write it: ``4,096``, ``1,000,000``, ``0.01``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


class Limits:
    """A field's range and whether it holds whole numbers only."""

    def __init__(self) -> None:
        self.low: Any = None
        self.low_open = False  # gt rather than ge
        self.high: Any = None
        self.high_open = False
        self.whole = False

    def take(self, item: Any) -> None:
        if isinstance(item, annotated_types.Ge):
            self.low, self.low_open = item.ge, False
        elif isinstance(item, annotated_types.Gt):
            self.low, self.low_open = item.gt, True
        elif isinstance(item, annotated_types.Le):
            self.high, self.high_open = item.le, False
        elif isinstance(item, annotated_types.Lt):
            self.high, self.high_open = item.lt, True
        elif isinstance(item, FieldInfo):
            for inner in item.metadata:
                self.take(inner)

    def walk(self, annotation: Any) -> None:
        """Read limits and the number type out of ``Annotated[...]`` and ``X | None``."""
        origin = get_origin(annotation)
        if origin is Annotated:
            base, *extras = get_args(annotation)
            self.walk(base)
            for extra in extras:
                self.take(extra)
        elif origin in (Union, types.UnionType):
            for arg in get_args(annotation):
                if arg is not type(None):
                    self.walk(arg)
        elif annotation is int:
            self.whole = True

    @property
    def known(self) -> bool:
        return self.low is not None or self.high is not None

    def describe(self, kind: str) -> str:
        """``a whole number from 1 to 4,096``, ``a number above 0 and at most 60``, ``a number at least 0``."""
        low, high = self.low, self.high
        if low is not None and high is not None and not self.low_open and not self.high_open:
            return f"{kind} from {_number(low)} to {_number(high)}"
        parts = []
        if low is not None:
            parts.append(f"above {_number(low)}" if self.low_open else f"at least {_number(low)}")
        if high is not None:
            parts.append(f"below {_number(high)}" if self.high_open else f"at most {_number(high)}")
        return f"{kind} {' and '.join(parts)}" if parts else kind


def model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The nested model a location points into (through lists of models, and mappings of names to
    models, too), if it is one."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            args = get_args(current) if get_origin(current) is list else ()
            if not args:
                return None
            current = args[0]
            continue
        if get_origin(current) is dict:  # a key of a mapping such as teams: {NAME: TeamConfig}
            args = get_args(current)
            current = args[1] if len(args) == 2 else None
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        by_alias = {info.alias or name: info for name, info in current.model_fields.items()}
        info = by_alias.get(part)
        if info is None:
            return None
        current = info.annotation
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_at(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> tuple[FieldInfo | None, Any]:
    """The field at ``loc`` and its type: a model's field, or (for a value of a mapping field, such as
    ``fair_share.weights.TEAM``) the mapping's field and the type of its values."""
    if model is None or not loc or isinstance(loc[-1], int):
        return None, None
    parent = model_at(model, loc[:-1])
    if parent is not None:
        info = {field.alias or name: field for name, field in parent.model_fields.items()}.get(str(loc[-1]))
        if info is not None:
            return info, info.annotation
    holder = model_at(model, loc[:-2]) if len(loc) >= 2 and not isinstance(loc[-2], int) else None
    if holder is not None:
        info = {field.alias or name: field for name, field in holder.model_fields.items()}.get(str(loc[-2]))
        args = get_args(info.annotation) if info is not None and get_origin(info.annotation) is dict else ()
        if len(args) == 2:
            return None, args[1]
    return None, None


def field_limits(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> Limits | None:
    """The limits of the field at ``loc``, if it is found."""
    info, annotation = _field_at(model, loc)
    if annotation is None:
        return None
    limits = Limits()
    limits.walk(annotation)
    for item in info.metadata if info is not None else ():
        limits.take(item)
    return limits


def _mapping_help(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> str:
    """``NAME: {parent, members, quotas}`` for a mapping of names to settings, else ``NAME: VALUE``."""
    _, annotation = _field_at(model, loc)
    args = get_args(annotation) if get_origin(annotation) is dict else ()
    if len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        fields = ", ".join(field.alias or name for name, field in args[1].model_fields.items())
        return f"NAME: {{{fields}}}"
    return "NAME: VALUE"


def _from_context(err: Mapping[str, Any]) -> Limits:
    limits = Limits()
    ctx = err.get("ctx") or {}
    makers: dict[str, Any] = {
        "ge": annotated_types.Ge,
        "gt": annotated_types.Gt,
        "le": annotated_types.Le,
        "lt": annotated_types.Lt,
    }
    for key, make in makers.items():
        if key in ctx:
            limits.take(make(ctx[key]))
    return limits


def phrase(err: Mapping[str, Any], model: type[BaseModel] | None = None, loc: tuple[int | str, ...] = ()) -> str | None:
    """The project's message for one pydantic error, or None to keep pydantic's. ``loc`` is the error's place
    in ``model`` (its own location by default)."""
    kind = err["type"]
    given = err.get("input")
    got = f", got {shown(given)}"
    if kind in _WHOLE | _NUMBER | _BOUNDS:
        limits = field_limits(model, loc or tuple(err["loc"]))
        if limits is None or not limits.known:
            context = _from_context(err)
            if limits is not None:
                context.whole = limits.whole
            limits = context
        whole = limits.whole or kind in _WHOLE
        noun = "a whole number" if whole else "a finite number" if kind == "finite_number" else "a number"
        return f"must be {limits.describe(noun)}{got}"
    if kind == "missing":
        return "is required"
    if kind in ("dict_type", "mapping_type"):
        empty = _when_empty(model, loc or tuple(err["loc"]), "{}") if given is None else ""
        return f"expected a mapping of {_mapping_help(model, loc or tuple(err['loc']))}{got}{empty}"
    if kind == "list_type":
        empty = _when_empty(model, loc or tuple(err["loc"]), "[]") if given is None else ""
        return f"expected a list{got}{empty}"
    if kind == "too_short":
        least = (err.get("ctx") or {}).get("min_length", 1)
        return f"must hold at least {_items(least)}, got {_items(len(given or ()))}"
    if kind in ("string_type", "string_unicode"):
        return f"expected text{got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false{got}"
    if kind == "literal_error":
        expected = (err.get("ctx") or {}).get("expected")
        return f"must be {expected}{got}" if expected else None
    if kind == "string_pattern_mismatch":  # the rule in words, not the regular expression
        rule = _PATTERN_RULES.get((err.get("ctx") or {}).get("pattern", ""))
        return f"expected {rule}{got}" if rule else None
    return None


_PATTERN_RULES = {USER_NAME_PATTERN: USER_NAME_RULE, LABEL_PATTERN: LABEL_RULE}


def _items(count: int) -> str:
    return "none" if count == 0 else f"{count:,} {'item' if count == 1 else 'items'}"


def _when_empty(model: type[BaseModel] | None, loc: tuple[int | str, ...], none: str) -> str:
    """What to write instead of a list or mapping left empty (``key:`` alone): leave it out or write ``[]``
    where that is valid; a field that must hold items says how many instead."""
    info, _ = _field_at(model, loc)
    if info is None:
        return f"; leave it out, or write {none} for none"
    least = max((item.min_length for item in info.metadata if isinstance(item, annotated_types.MinLen)), default=0)
    if least:
        return f"; it must hold at least {_items(least)}"
    return f"; write {none} for none" if info.is_required() else f"; leave it out, or write {none} for none"
