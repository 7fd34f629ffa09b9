"""Reading YAML and JSON the user wrote, strictly: safe YAML, and a key given twice is an error.

PyYAML and ``json`` both let the last of two equal keys win silently, so a floor written twice
(``P@5: 0.99`` and later ``P@5: 0.1``) would gate on whichever came last. Here that is a
:class:`DuplicateKeyError` naming the key and its line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class DuplicateKeyError(ValueError):
    """A mapping gives the same key twice."""

    def __init__(self, key: object, line: int | None) -> None:
        self.key = key
        self.line = line
        where = "" if line is None else f" at line {line}"
        super().__init__(f"key {key!r} is given twice{where}; keep one")


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys (DuplicateKeyError); YAML syntax errors
    raise ``yaml.YAMLError`` as usual."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base constructor says so properly
                break
            if duplicate:
                raise DuplicateKeyError(key, key_node.start_mark.line + 1)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=StrictLoader)  # safe: StrictLoader is a SafeLoader


def load_json(text: str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """``json.loads`` that refuses duplicate keys (DuplicateKeyError, without a line number);
    ``parse_constant`` as ``json.loads`` takes it (``NaN``, ``Infinity``, ``-Infinity``)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise DuplicateKeyError(key, None)
            out[key] = value
        return out

    return json.loads(text, object_pairs_hook=pairs, parse_constant=parse_constant)
