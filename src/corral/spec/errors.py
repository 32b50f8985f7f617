"""Spec errors that name the field and what would be valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class FieldError:
    """One problem in user input: a dotted field path and a message."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class SpecError(ValueError):
    """User input that does not make a valid spec; carries every field problem found."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def field_path(loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic location into ``resources.gpus`` or ``command[0]``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("function-after", "function-before", "function-plain", "function-wrap"):
            continue
        elif part.startswith(("function-", "constrained-")) or part in {"str", "list[str]", "int", "float"}:
            continue  # union branch tags, not user field names
        else:
            part = part or '""'  # an empty key still gets a visible name
            path += f".{part}" if path else part
    return path


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


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


def from_validation_error(exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> SpecError:
    """Collapse pydantic's errors into one message per field, union noise removed."""
    seen: dict[str, str] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        path = field_path(loc)
        if err["type"] == "extra_forbidden" and loc:  # the unknown key is the user's, whatever it looks like
            path = _join(field_path(loc[:-1]), str(loc[-1]) or '""')
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        message = str(err["msg"])
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if err["type"] == "model_type":  # pydantic names its class: "… or instance of ResourcesSpec"
            got = err.get("input")
            kind = (
                "nothing"
                if got is None
                else f"a {type(got).__name__} ({got!r})"
                if isinstance(got, str)
                else (f"a {type(got).__name__}")
            )
            message = f"expected a mapping of fields, got {kind}"
            nested = model_at(model, loc) if model is not None else None
            if nested is not None:
                message += "; valid fields are " + ", ".join(field_names(nested))
        if err["type"] == "extra_forbidden":
            message = "unknown field"
            parent = model_at(model, tuple(err["loc"])[:-1]) if model is not None else None
            if parent is not None:
                message += "; valid fields are " + ", ".join(field_names(parent))
        seen.setdefault(path, message)
    return SpecError([FieldError(f, m) for f, m in seen.items()])
