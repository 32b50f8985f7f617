"""Spec errors that name the field and what would be valid."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from corral.spec.wording import model_at, phrase, shown

__all__ = ["FieldError", "SpecError", "field_names", "field_path", "from_validation_error", "model_at", "user_loc"]


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


def _tag(part: int | str) -> bool:
    """A part of a pydantic location that is not the user's: a validator's or a union branch's tag."""
    return isinstance(part, str) and (
        part.startswith(("function-", "constrained-")) or part in {"str", "list[str]", "int", "float"}
    )


def user_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A pydantic location without the tags of validators and union branches: field names and indexes."""
    return tuple(part for part in loc if not _tag(part))


def field_path(loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic location into ``resources.gpus`` or ``command[0]``."""
    path = ""
    for part in user_loc(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            part = part or '""'  # an empty key still gets a visible name
            path += f".{part}" if path else part
    return path


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


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
        message = phrase(err, model, user_loc(loc)) or message
        if err["type"] == "model_type":  # pydantic names its class: "… or instance of ResourcesSpec"
            got = err.get("input")
            kind = f"a {type(got).__name__} ({shown(got)})" if isinstance(got, str) else shown(got)
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
