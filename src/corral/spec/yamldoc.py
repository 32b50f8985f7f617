"""Decoding a YAML document for any spec: syntax errors and repeated keys name their line."""

from __future__ import annotations

from typing import Any

import yaml

from corral.spec.errors import FieldError, SpecError


class _NoDuplicateKeysLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (the plain loader
    keeps the last value and silently drops the first)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.tagged: set[int] = set()  # ids of the scalar nodes whose tag was written out

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue  # keys merged in with `<<` may be overridden: that is what merging is for
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = first_line.get(key)
            except TypeError:
                continue  # not hashable: the base loader says so
            if earlier is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (first on line {earlier + 1})", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)

    def compose_scalar_node(self, anchor: Any) -> yaml.ScalarNode:
        """As the base loader's; scalars with a tag written out (``!!binary``) are noted in ``tagged``."""
        tag = self.peek_event().tag  # type: ignore[no-untyped-call]
        node: yaml.ScalarNode = super().compose_scalar_node(anchor)
        if tag not in (None, "!"):
            self.tagged.add(id(node))
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """A whole number, except that one of more digits than Python reads (thousands) is an error
        naming its line, not a ValueError from deep inside the loader."""
        try:
            value: int = super().construct_yaml_int(node)
        except ValueError:
            digits = sum(c.isdigit() for c in str(node.value))
            raise yaml.constructor.ConstructorError(
                None, None, f"a whole number of {digits:,} digits, more than any field takes", node.start_mark
            ) from None
        return value


_NoDuplicateKeysLoader.add_constructor("tag:yaml.org,2002:int", _NoDuplicateKeysLoader.construct_yaml_int)


SPEC_TEXT_KEYS = ("command", "env")
"""The keys of a job or service file whose items are text as written (``load_yaml_document``'s ``as_written``)."""
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_VALUES = frozenset(f"tag:yaml.org,2002:{kind}" for kind in ("bool", "int", "float", "timestamp"))  # not text


def load_yaml_document(text: str, source: str = "job file", as_written: tuple[str, ...] = ()) -> Any:
    """Decode YAML text; syntax errors, and a key given twice in one mapping, name the line and column.

    ``as_written`` names top-level keys whose list items or mapping values are text, whatever they look
    like: an unquoted ``010``, ``yes`` or ``1.50`` there is kept as those characters, not read as 8, true
    or 1.5 and written back differently (a command's arguments, environment variables)."""
    loader: _NoDuplicateKeysLoader | None = None
    try:
        loader = _NoDuplicateKeysLoader(text)  # reads the text: a character YAML refuses is an error here
        node = loader.get_single_node()
        if node is None:
            return None
        if as_written:
            _keep_as_written(loader, node, as_written)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([FieldError("", f"{source} is not valid YAML{where}: {problem}")]) from None
    except RecursionError:
        raise SpecError([FieldError("", f"{source} nests lists or mappings too deeply to read")]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _keep_as_written(loader: _NoDuplicateKeysLoader, document: yaml.Node, keys: tuple[str, ...]) -> None:
    """Tag the unquoted scalars under ``keys`` (items of a list, keys and values of a mapping) as text, so that they
    are constructed from the characters written; an empty value stays null, for its field to say so, and a
    tag written out (``!!binary``) is kept."""
    if not isinstance(document, yaml.MappingNode):
        return
    for key_node, value_node in document.value:
        if not (isinstance(key_node, yaml.ScalarNode) and key_node.value in keys and key_node.tag == _STR):
            continue
        if isinstance(value_node, yaml.SequenceNode):
            scalars = value_node.value
        elif isinstance(value_node, yaml.MappingNode):
            scalars = _mapping_scalars(value_node)
        else:
            continue
        for scalar in scalars:
            plain = isinstance(scalar, yaml.ScalarNode) and scalar.style is None and id(scalar) not in loader.tagged
            if plain and scalar.tag in _VALUES:
                scalar.tag = _STR


def _mapping_scalars(mapping: yaml.MappingNode) -> list[yaml.Node]:
    """A mapping's keys and values (YAML reads a key ON as true), and those of mappings merged in with ``<<``."""
    out: list[yaml.Node] = []
    for key, value in mapping.value:
        if key.tag != _MERGE:
            out += (key, value)
        elif isinstance(value, yaml.MappingNode):
            out += _mapping_scalars(value)
        elif isinstance(value, yaml.SequenceNode):
            out += [
                scalar
                for item in value.value
                if isinstance(item, yaml.MappingNode)
                for scalar in _mapping_scalars(item)
            ]
    return out
