"""What crosses the pipes between pytest and an isolated retriever's process: data, never code.

Each message is one line of JSON (``ensure_ascii``, so a line holds no raw newline) read and
written by :class:`Frames`. The values inside are a tiny typed encoding (:func:`encode`,
:func:`decode`) that carries exactly what a retriever's result may hold and
``normalise_hits`` tells apart (systems/retriever.py): ``None``, booleans, integers, floats
(``NaN`` and infinities too: the parent refuses them as scores, as it does in process),
strings (lone surrogates included), bytes, lists, tuples, mappings, an iterator's first items,
and anything else as a :class:`Foreign`: its type's name, its ``repr`` and, when ``float()``
takes it (a numpy scalar), that number. A JSON object is always one of the markers below, so
no value of the user's can pass for one.

The encoding is made in the child (the user's code may run there: ``repr``, ``float``, an
iterator) and read in pytest by ``json.loads`` and :func:`decode`, which build only the types
above: nothing the child sends can run code in pytest, as an unpickled ``__reduce__`` did.
Both sides are bounded: a message is at most :data:`MAX_FRAME_BYTES` (read as it streams), a
value nests at most :data:`MAX_DEPTH` levels and holds at most :data:`MAX_VALUES` values, and
text shown from the child (an error, a ``repr``) at most :data:`MAX_TEXT` characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_FRAME_BYTES",
    "MAX_TEXT",
    "MAX_VALUES",
    "Foreign",
    "NotAResult",
    "TooLarge",
    "bounded",
    "decode",
    "decode_frame",
    "encode",
    "encode_frame",
    "encode_result",
    "short_repr",
    "type_name",
]

#: The most bytes one message may take (a million hits with ids of 60 characters take ~90 MiB).
MAX_FRAME_BYTES = 128 * 2**20
#: The most values (each string, number, list...) one message may hold: a million
#: ``(doc_id, score)`` pairs are 3,000,001.
MAX_VALUES = 4_000_000
#: The deepest a value may nest (a result of pairs is 3 deep: list, pair, id).
MAX_DEPTH = 32
#: The most characters kept of a text from the child (an error, a ``repr``, a traceback line).
MAX_TEXT = 2000
#: The most characters kept of a traceback from the child (shown with ``-v`` only).
MAX_TRACEBACK = 64_000


class NotAResult(ValueError):
    """Bytes from the child that are not a message of this codec; the text says why."""


class TooLarge(ValueError):
    """A value the child cannot send: over :data:`MAX_VALUES` values or :data:`MAX_DEPTH`
    levels, or a message over :data:`MAX_FRAME_BYTES`; the text says which, in words, and
    ``hint`` what to return instead."""

    def __init__(self, text: str, hint: str = "return the top k") -> None:
        super().__init__(text)
        self.hint = hint


class Foreign:
    """A value of a type the codec does not carry, as the parent sees it: its type's name, its
    ``repr`` (as the child made it) and, when the child's ``float()`` took it, that number."""

    __slots__ = ("number", "text", "type_name")

    def __init__(self, type_name: str, text: str, number: float | None) -> None:
        self.type_name = type_name
        self.text = text
        self.number = number

    def __repr__(self) -> str:
        return self.text

    def __float__(self) -> float:
        if self.number is None:
            raise TypeError(f"float() argument must be a number, not '{self.type_name}'")
        return self.number


def type_name(value: Any) -> str:
    """The name of ``value``'s type, the child's for a :class:`Foreign`."""
    return value.type_name if isinstance(value, Foreign) else type(value).__name__


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def short_repr(value: Any) -> str:
    """``repr(value)`` at most :data:`MAX_TEXT` characters, never raising (a ``__repr__`` that
    raises, a structure too deep to write out)."""
    try:
        text = repr(value)
    except BaseException:  # the user's __repr__, or RecursionError: say what it is instead
        return f"<{type(value).__name__} object>"
    return bounded(text)


# -- the child's side: the user's result as data --------------------------------------------


_MAX_INT_BITS = 4096


class _Budget:
    def __init__(self) -> None:
        self.values = 0

    def spend(self) -> None:
        self.values += 1
        if self.values > MAX_VALUES:
            raise TooLarge(f"more than {MAX_VALUES:,} values")


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data of the typed encoding; :class:`TooLarge` when it holds
    more than :data:`MAX_VALUES` values or nests deeper than :data:`MAX_DEPTH` levels."""
    return _encode(value, _Budget(), 0)


def encode_result(value: Any, *, read_at_most: int | None = None) -> Any:
    """A retriever's result as the parent's ``normalise_hits`` reads it (the child's side): a
    mapping as a mapping; any other sized iterable (a list, a tuple, a set, an array) as the
    list of its items; an iterator as ``{"$t": "iter"}`` holding its first ``read_at_most``
    items (None: all), which the parent reads as an iterator again; anything else as itself.

    The usual shapes (pairs of a string and a number, ``{id: score}``, ids alone) travel as
    flat columns, which JSON writes and reads at C speed."""
    budget = _Budget()
    if isinstance(value, Mapping):
        return _scores(value) or _encode(value, budget, 0)
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Iterable):
        return _encode(value, budget, 0)
    if isinstance(value, Sized):
        if len(value) >= MAX_VALUES:  # each item is one value at least
            raise TooLarge(f"more than {MAX_VALUES:,} values")
        items = list(value)
    else:
        items = []
        for item in value:
            if read_at_most is not None and len(items) >= read_at_most:
                break
            items.append(item)
            if len(items) >= MAX_VALUES:
                raise TooLarge(f"more than {MAX_VALUES:,} values")
    budget.spend()
    encoded = _pairs(items) or [_encode(item, budget, 1) for item in items]
    return encoded if isinstance(value, Sized) else {"$t": "iter", "v": encoded}


def _plain_number(value: Any) -> bool:
    kind = type(value)
    return kind is float or (kind is int and value.bit_length() <= _MAX_INT_BITS)


def _pairs(items: list[Any]) -> dict[str, Any] | None:
    """``items`` as columns when each is a 2-tuple (or each a 2-list) of a ``str`` and a plain
    number, or each a ``str``; else None."""
    if not items:
        return None
    if all(type(item) is str for item in items):
        return {"$t": "ids", "ids": items}
    kind = type(items[0])
    if kind is not tuple and kind is not list:
        return None
    if len(items) * 3 >= MAX_VALUES:
        raise TooLarge(f"more than {MAX_VALUES:,} values")
    ids: list[str] = []
    scores: list[float] = []
    for item in items:
        if type(item) is not kind or len(item) != 2:
            return None
        doc, score = item
        if type(doc) is not str or not _plain_number(score):
            return None
        ids.append(doc)
        scores.append(score)
    return {"$t": "pairs", "of": kind.__name__, "ids": ids, "scores": scores}


def _scores(mapping: Mapping[Any, Any]) -> dict[str, Any] | None:
    """``{id: score}`` as columns when every key is a ``str`` and every value a plain number."""
    if type(mapping) is not dict:
        return None
    if len(mapping) * 2 >= MAX_VALUES:
        raise TooLarge(f"more than {MAX_VALUES:,} values")
    ids = list(mapping)
    scores = list(mapping.values())
    if all(type(doc) is str for doc in ids) and all(_plain_number(v) for v in scores):
        return {"$t": "scores", "ids": ids, "scores": scores}
    return None


def _encode(value: Any, budget: _Budget, depth: int) -> Any:
    budget.spend()
    if depth > MAX_DEPTH:
        raise TooLarge(
            f"a value nested deeper than {MAX_DEPTH} levels", "expected (doc_id, score) pairs"
        )
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value.bit_length() <= _MAX_INT_BITS:  # JSON reads back at most 4,300 digits
            return int(value)
    elif isinstance(value, float):
        return float(value)
    elif isinstance(value, str):
        return str.__str__(value)
    elif isinstance(value, (bytes, bytearray)):
        return {"$t": "bytes", "v": bytes(value).decode("latin-1")}
    elif isinstance(value, Mapping):
        pairs = [
            [_encode(k, budget, depth + 1), _encode(v, budget, depth + 1)] for k, v in value.items()
        ]
        return {"$t": "map", "v": pairs}
    elif isinstance(value, tuple):
        return {"$t": "tuple", "v": [_encode(item, budget, depth + 1) for item in value]}
    elif isinstance(value, Sequence):
        return [_encode(item, budget, depth + 1) for item in value]
    return _foreign(value)


def _foreign(value: Any) -> dict[str, Any]:
    number: float | None = None
    if not isinstance(value, (str, bytes)):
        try:
            number = float(value)
        except BaseException:  # not a number: the parent refuses it where one is needed
            number = None
    return {
        "$t": "obj",
        "type": bounded(type(value).__name__, 200),
        "repr": short_repr(value),
        "num": number,
    }


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """``message`` as one line of JSON; :class:`TooLarge` past :data:`MAX_FRAME_BYTES`."""
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
    if len(data) > MAX_FRAME_BYTES:
        raise TooLarge(f"{len(data):,} bytes, more than {MAX_FRAME_BYTES // 2**20} MiB")
    return data


# -- the parent's side: data back into the values above -------------------------------------


def decode_frame(data: bytes) -> dict[str, Any]:
    """One line from the child as a JSON object; :class:`NotAResult` for anything else."""
    try:
        found = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise NotAResult(
            f"not a message of its codec ({_excerpt(data)}: {_first_line(exc)})"
        ) from None
    if not isinstance(found, dict):
        raise NotAResult(f"not a message of its codec ({_excerpt(data)})")
    return found


def decode(data: Any) -> Any:
    """A value of the typed encoding back as Python values (the parent's side): only
    ``None``, bool, int, float, str, bytes, list, tuple, dict, an iterator and
    :class:`Foreign` are made; :class:`NotAResult` for anything the encoding cannot hold."""
    return _decode(data, 0, [0])


def _decode(data: Any, depth: int, count: list[int]) -> Any:
    count[0] += 1
    if count[0] > MAX_VALUES or depth > MAX_DEPTH + 1:
        raise NotAResult("a value larger or deeper than its codec allows")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_decode(item, depth + 1, count) for item in data]
    if not isinstance(data, dict):
        raise NotAResult(f"a {type(data).__name__} where a value was expected")
    tag, value = data.get("$t"), data.get("v")
    if tag in ("ids", "pairs", "scores"):
        return _columns(data, count)
    if tag == "tuple" and isinstance(value, list) and len(data) == 2:
        return tuple(_decode(item, depth + 1, count) for item in value)
    if tag == "iter" and isinstance(value, (list, dict)) and len(data) == 2:
        items = _decode(value, depth + 1, count)
        if isinstance(items, list):
            return _iterate(items)
    if tag == "bytes" and isinstance(value, str) and len(data) == 2:
        try:
            return value.encode("latin-1")
        except UnicodeEncodeError:
            raise NotAResult("bytes that are not bytes") from None
    if tag == "map" and isinstance(value, list) and len(data) == 2:
        out: dict[Any, Any] = {}
        for pair in value:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise NotAResult("a mapping entry that is not a pair")
            key = _decode(pair[0], depth + 1, count)
            try:
                out[key] = _decode(pair[1], depth + 1, count)
            except TypeError:  # an unhashable key: no Python mapping held one
                raise NotAResult("a mapping with a key that cannot be one") from None
        return out
    if tag == "obj" and set(data) == {"$t", "type", "repr", "num"}:
        name, text, number = data["type"], data["repr"], data["num"]
        if (
            isinstance(name, str)
            and isinstance(text, str)
            and (number is None or (isinstance(number, float) and not isinstance(number, bool)))
        ):
            return Foreign(bounded(name, 200), bounded(text), number)
    raise NotAResult(f"an object its codec does not know ({_excerpt(json.dumps(data)[:60])})")


def _columns(data: dict[str, Any], count: list[int]) -> Any:
    """The flat shapes of :func:`encode_result`, checked: strings for ids, plain numbers for
    scores, columns of one length."""
    tag, ids = data["$t"], data.get("ids")
    if not (isinstance(ids, list) and all(type(doc) is str for doc in ids)):
        raise NotAResult(f"{tag} whose ids are not strings")
    count[0] += len(ids)
    if tag == "ids" and len(data) == 2:
        return ids
    scores = data.get("scores")
    if not (
        isinstance(scores, list)
        and len(scores) == len(ids)
        and all(type(score) is float or type(score) is int for score in scores)
    ):
        raise NotAResult(f"{tag} whose scores are not numbers, one per id")
    count[0] += len(scores)
    if count[0] > MAX_VALUES:
        raise NotAResult("a value larger than its codec allows")
    if tag == "scores" and len(data) == 3:
        return dict(zip(ids, scores, strict=True))
    if tag == "pairs" and len(data) == 4 and data.get("of") in ("tuple", "list"):
        if data["of"] == "tuple":
            return list(zip(ids, scores, strict=True))
        return [[doc, score] for doc, score in zip(ids, scores, strict=True)]
    raise NotAResult(f"{tag} of a shape its codec does not know")


def _iterate(items: list[Any]) -> Iterator[Any]:
    yield from items


def _excerpt(data: bytes | str) -> str:
    head = data[:40]
    more = f" and {len(data) - 40:,} more" if len(data) > 40 else ""
    return f"first bytes {head!r}{more}"


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return bounded(text, 200)
