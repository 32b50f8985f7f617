"""Values that pydantic's lax mode would convert and a spec must not: ``true`` for a number (1), or ``1``,
``"yes"`` and ``"on"`` for a boolean. Each is refused as a value of the wrong type, so that
``corral.spec.wording.phrase`` words it as it does any other: the field's limits and the value given."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError


def not_a_flag(value: Any) -> Any:
    """A number field's value, unless it is a boolean: ``must be a number above 0, got true``."""
    if isinstance(value, bool):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


def only_a_flag(value: Any) -> Any:
    """A boolean field's value, if it is a boolean: ``expected true or false, got 1``."""
    if isinstance(value, bool):
        return value
    raise PydanticCustomError("bool_type", "Input should be a valid boolean")


Flag = Annotated[bool, BeforeValidator(only_a_flag), Field(strict=True)]
"""true or false, and nothing converted to one (``1``, ``"yes"``)."""
