"""Reading an OpenAI-compatible embeddings answer (``{"data": [{"index", "embedding"}, ...],
"model"}``), as the http embedder (http.py) gets it: parsed only once its bytes are within the
answer's limit (embed/net.py), then checked field by field: every embedding's ``index`` a whole
number given once, vectors lists of finite float32 numbers of one width, the served model name
at most :data:`LONGEST_NAME` printable characters. What is wrong is one :class:`AnswerError`,
which the embedder says naming the service; what a message quotes of a body is :func:`page`."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval_gate.display import page_text, quoted, redact
from retrieval_gate.records import counted

#: The longest model name an answer may give (it goes into the identity).
LONGEST_NAME = 256

#: The most of an answer a message looks at (an error page's, a body that is not JSON): its
#: title or first words are near the start, and masking secrets in megabytes takes seconds.
PAGE_MOST = 1 << 16


def page(payload: bytes) -> str:
    """What a message quotes of an answer's body: its HTML title or its text, from its first
    ``PAGE_MOST`` bytes, masked, escaped and cut (display/). A body cut here loses its last
    word too: half a key at the cut would be no key to mask, and runs of blanks before it
    close up when quoted."""
    text = payload[:PAGE_MOST].decode("utf-8", "replace")
    if len(payload) > PAGE_MOST:
        if len(text.split(None, 1)) < 2:
            return f"a body of more than {PAGE_MOST >> 10} KiB without a blank"
        text = text.rsplit(None, 1)[0]
    return quoted(page_text(text))


class AnswerError(Exception):
    """An answer that is no embeddings answer for the texts sent: what it was, in words."""


def read_answer(
    payload: bytes, count: int, *, expected: int | None, why: str
) -> tuple[np.ndarray, str | None]:
    """The ``count`` vectors of an OpenAI-compatible embeddings answer, in the order of their
    texts, and the model name it gives (masked); ``expected``: the width they must have
    (``why``: whence it comes). Anything else raises :class:`AnswerError` saying what the
    answer was."""
    try:
        answer = json.loads(payload)
    except json.JSONDecodeError:
        text = page(payload) or "an empty body"
        raise AnswerError(f"answered something that is not JSON: {text}") from None
    except RecursionError:
        # Python's JSON reader recurses per level of nesting: no answer nests that deep.
        raise AnswerError("answered JSON nested too deeply to be an embeddings answer") from None
    except ValueError:
        # Not a syntax error: a number Python will not read (an integer of more than 4,300
        # digits), which no embedding is.
        raise AnswerError("answered JSON holding a number too long to be read") from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise AnswerError(not_openai(answer, payload))
    if len(data) != count:
        raise AnswerError(
            f"answered {counted(len(data), 'embedding')} for {counted(count, 'text')}"
        )
    rows: list[Any] = [None] * count
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise AnswerError(f"answered embedding #{position} that is not a JSON object")
        index = _index(item, position, count)
        if rows[index] is not None:
            raise AnswerError(
                f"answered two embeddings with 'index' {index} (#{rows[index][0]} and "
                f"#{position}): which text each is cannot be told"
            )
        vector = item.get("embedding")
        if not isinstance(vector, list) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in vector
        ):
            raise AnswerError(f"answered embedding #{index} that is not a list of numbers")
        rows[index] = (position, vector)
    rows = [vector for _, vector in rows]
    widths = {len(row) for row in rows}
    if len(widths) != 1 or 0 in widths:
        found = ", ".join(str(w) for w in sorted(widths))
        raise AnswerError(f"answered embeddings of unequal or zero width ({found} dimensions)")
    (width,) = widths
    if expected and width != expected:
        raise AnswerError(f"answered {width} dimensions, expected {expected} ({why})")
    # Python's JSON reads NaN and Infinity, and a number past float32's range becomes inf
    # in float32: said here, naming the service and the vector, before any index sees it.
    # An integer past float64's range cannot be converted at all: it is said the same way.
    with np.errstate(over="ignore"):
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except OverflowError:
            vectors = np.asarray(
                [
                    [v if isinstance(v, float) or abs(v) < 2**128 else math.inf for v in row]
                    for row in rows
                ],
                dtype=np.float32,
            )
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise AnswerError(
            f"answered embedding #{bad} with a value that is not a finite float32 (NaN, "
            "infinity, or beyond +-3.4e38)"
        )
    served = answer.get("model")
    if isinstance(served, str) and (
        len(served) > LONGEST_NAME or not (served.isprintable() and served.strip())
    ):
        # The identity, which holds it, is written to the cache, the baseline and every
        # report: a megabyte or a terminal escape is no model's name.
        raise AnswerError(
            f"answered a 'model' of {counted(len(served), 'character')} that cannot be a "
            f"model's name (blank, longer than {LONGEST_NAME}, or holding control "
            "characters)"
        )
    # A service that echoes the key (or any credential) as its model name must not put it
    # in the identity.
    return vectors, redact(served) if isinstance(served, str) else None


def _index(item: Mapping[str, Any], position: int, count: int) -> int:
    """The text an answer's embedding #``position`` belongs to: its ``index``, which every
    embedding must give (the OpenAI protocol's field; vectors are never matched to texts
    by their place in the list, which a server answering out of order would swap), a whole
    number (not JSON's ``true``, which Python counts as 1) from 0 to ``count`` - 1."""
    if "index" not in item:
        raise AnswerError(
            f"answered embedding #{position} without an 'index': which text it is cannot be "
            "told (the OpenAI protocol gives each embedding the position of its text)"
        )
    index = item["index"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
        if isinstance(index, (bool, int, float)) or index is None:
            shown = json.dumps(index)[:40]  # true, 1.0, -1, null: said as JSON wrote them
        else:
            shown = "a string" if isinstance(index, str) else "a list or an object"
        raise AnswerError(
            f"answered embedding #{position} with 'index' {shown}, not a whole number from "
            f"0 to {count - 1} (the position of its text)"
        )
    return index


def not_openai(answer: Any, payload: bytes) -> str:
    """What to say of JSON without a ``data`` list: a service's native API (Ollama's
    ``/api/embed`` answers ``{"embeddings": [...]}``, its older ``/api/embeddings``
    ``{"embedding": [...]}``, TEI's ``/embed`` a bare list) is a ``base_url`` pointing
    beside the OpenAI-compatible endpoint; anything else (an error said with status 200) is
    quoted."""
    if isinstance(answer, list) or (
        isinstance(answer, dict) and ("embeddings" in answer or "embedding" in answer)
    ):
        shape = (
            "a bare list"
            if isinstance(answer, list)
            else ("'embeddings'" if "embeddings" in answer else "'embedding'")
        )
        return (
            f"answered JSON with {shape} where the OpenAI protocol has a 'data' list, as a "
            "service's native API does (Ollama's /api, TEI's /embed): set 'base_url' to its "
            "OpenAI-compatible address, which ends in /v1 for both"
        )
    text = page(payload)
    return f"answered JSON without a 'data' list of embeddings: {text}"
