"""Decoding a YAML document for any spec: syntax errors and repeated keys name their line."""

from __future__ import annotations

from typing import Any

import yaml

from corral.spec.errors import FieldError, SpecError


class _NoDuplicateKeysLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (the plain loader
    keeps the last value and silently drops the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
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


def load_yaml_document(text: str, source: str = "job file") -> Any:
    """Decode YAML text; syntax errors, and a key given twice in one mapping, name the line and column."""
    try:
        return yaml.load(text, Loader=_NoDuplicateKeysLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError([FieldError("", f"{source} is not valid YAML{where}: {problem}")]) from None
    except RecursionError:
        raise SpecError([FieldError("", f"{source} nests lists or mappings too deeply to read")]) from None
