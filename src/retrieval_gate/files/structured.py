"""Reading YAML and JSON the user wrote, strictly: safe YAML, and a key given twice is an error.

PyYAML and ``json`` both let the last of two equal keys win silently, so a floor written twice
(``P@5: 0.99`` and later ``P@5: 0.1``) would gate on whichever came last. Here that is a
:class:`DuplicateKeyError` naming the key and its line.
"""

from __future__ import annotations

import functools
import json
import re
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
    raise ``yaml.YAMLError`` as usual.

    Parsed by libyaml where PyYAML has it (five times faster: a suite of a thousand queries is
    read in a tenth of the time), by the pure-Python parser otherwise. A text libyaml refuses is
    parsed again by the pure one, so what a mistake is called does not depend on the build."""
    import yaml

    fast, pure = _strict_loaders()
    try:
        return yaml.load(text, Loader=fast)  # safe: both loaders are safe loaders
    except yaml.YAMLError:
        if fast is pure:
            raise
    return yaml.load(text, Loader=pure)


@functools.cache
def _strict_loaders() -> tuple[type, type]:
    """The (fast, pure) safe loaders that refuse a key given twice; fast is pure without libyaml."""
    import yaml
    from yaml.constructor import SafeConstructor

    def mapping(loader: SafeConstructor, node: yaml.MappingNode, deep: bool = False) -> Any:
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
        return SafeConstructor.construct_mapping(loader, node, deep=deep)

    def strict(base: type) -> Any:
        loader: Any = type(f"Strict{base.__name__}", (base,), {})
        loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
        return loader

    pure = strict(yaml.SafeLoader)
    return (strict(yaml.CSafeLoader) if yaml.__with_libyaml__ else pure), pure


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


# A JSON string (its escapes unrolled, so the engine never backtracks) and what is left once
# strings are gone: only brackets count towards the nesting.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
#: Below this many brackets a piece is measured by counting alone (see :func:`nested_deeper`).
_PIECE = 4096
#: Past this many brackets the running depth is summed by numpy (:func:`_deeper_counted`).
_LARGE = 1 << 20
_BLOCK = 1 << 22


def nested_deeper(text: str, limit: int) -> bool:
    """Whether the JSON ``text`` nests lists and objects more than ``limit`` deep, decided
    before any parser recurses into it (``json.loads`` of 200,000 ``[`` raises RecursionError).

    Strings are cut out first (a ``[`` inside a string is no nesting), then only the brackets
    are looked at, by counts the C library makes: empty pairs are removed a few times (a record's
    lists of numbers become nothing), and what is left is halved until each piece can be decided
    by counting (a piece that opens no more than the room left cannot go deeper, one that ends
    deeper than the limit did), or, past a million brackets, summed by numpy. Linear in the text
    for any input (50 MB in a few seconds at worst); ``text`` need not be valid JSON (where
    brackets do not pair up the parser refuses the text anyway, and the answer may be off by
    the few levels the removed pairs stood for).
    """
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case: a short line cannot nest deeper than its brackets
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).replace("{", "[").replace("}", "]")
    for _ in range(3):
        # Each pass removes every innermost pair, so (in balanced text) one level exactly.
        shorter = brackets.replace("[]", "")
        if len(shorter) == len(brackets):
            break
        brackets, limit = shorter, limit - 1
    if len(brackets) > _LARGE:
        return _deeper_counted(brackets, limit)
    pieces = [(brackets, 0)]  # (piece, depth at its start)
    while pieces:
        piece, depth = pieces.pop()
        opened = piece.count("[")
        if depth + opened <= limit:
            continue
        if 2 * opened - len(piece) + depth > limit:
            return True  # it ends deeper than the limit
        if len(piece) <= _PIECE:
            for char in piece:
                depth += 1 if char == "[" else -1
                if depth > limit:
                    return True
            continue
        half = len(piece) // 2
        left = piece[:half]
        pieces.append((piece[half:], depth + 2 * left.count("[") - len(left)))
        pieces.append((left, depth))
    return False


def _deeper_counted(brackets: str, limit: int) -> bool:
    """:func:`nested_deeper` of a long string of brackets, by a running sum in numpy, a block at
    a time (a Python loop over tens of millions of brackets takes seconds)."""
    import numpy as np

    data = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    depth = 0
    for start in range(0, len(data), _BLOCK):
        # "[" is 91 and "]" 93: 92 less the byte is +1 for an opening, -1 for a closing.
        steps = 92 - data[start : start + _BLOCK].astype(np.int64)
        running = np.cumsum(steps) + depth
        if int(running.max()) > limit:
            return True
        depth = int(running[-1])
    return False
