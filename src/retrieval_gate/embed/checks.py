"""The embedding boundary: every vector an embedder hands an embedding system passes here.

An embedder (a plug-in's above all) may return NaN or infinite values, too few or too many rows,
rows of another width than it said, or never return. Each is one line naming the embedder and
the system (:func:`encode`), whichever index the vectors go to next, rather than a traceback
from deep inside that index or a session that hangs. All-zero vectors are legal but have no
direction: :func:`zero_vectors_warning` says how many, and what the system's index does with
them (docs/embedding.md, "Time limits and bad vectors").

Each encoder call runs under the system's ``timeout``: a query's encoding gets ``timeout``
seconds, a document encoding ``timeout`` per batch of ``batch_size`` texts (a model's load,
before it, is not timed here: a first download or a distillation may take minutes). An
embedder that bounds its own calls (``bounds_itself``: the HTTP service's requests, Ray's
document calls) is left to do so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_gate.display import shown
from retrieval_gate.errors import (
    LibraryError,
    RetrievalGateError,
    RunError,
    library_error,
    library_failures,
)
from retrieval_gate.records import counted, plural
from retrieval_gate.usercode import CallTimeout, Worker, call_bounded

__all__ = ["EmbeddingCall", "encode", "zero_rows", "zero_vectors_warning"]


@dataclass(frozen=True)
class EmbeddingCall:
    """Who embeds, for the messages and the time limit: the system (its name and settings
    file), its embedder by name, its ``timeout`` (0: none) and ``batch_size``, and what its
    index does with an all-zero vector (the index backend's ``zero_vectors``)."""

    system: str
    embedder: str
    timeout: float
    batch_size: int = 64
    path: str | None = None
    zero_effect: str = "cosine similarity with a zero vector is 0 whatever the other vector"
    #: The system's one thread for its bounded calls (usercode.Worker), reused query after
    #: query; None: a thread per call.
    worker: Worker | None = field(default=None, compare=False, repr=False)

    def bounded(self, function: Any, limit: float | None) -> Any:
        """``function()`` under ``limit`` seconds, on the system's worker when it has one."""
        if self.worker is not None:
            return self.worker.call(function, limit)
        return call_bounded(function, limit)

    def error(self, message: str) -> RunError:
        return RunError(
            f"embedder {self.embedder!r} {message}", path=self.path, entry=f"system.{self.system}"
        )


def _width(embedder: Any) -> int | None:
    """The width the embedder said, without loading a model for it."""
    from retrieval_gate.embed import known_dim

    try:
        return known_dim(embedder)
    except Exception:
        return None  # a plug-in whose ``dim`` fails: its vectors' own width is checked alone


def encode(
    embedder: Any,
    texts: Sequence[str],
    *,
    queries: bool,
    call: EmbeddingCall,
    progress: bool = False,
    bounded: bool = True,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """``texts`` encoded as document (or query) vectors, float32 ``[len(texts), dim]``, checked.

    ``bounded``: run the encoder under the call's time limit (False where the caller already
    bounds it, as a timed query's search does). ``names``: each text's id (a document, chunk
    or query id), which a message about a bad vector quotes in place of its row.
    """
    from retrieval_gate.embed import LazyEmbedder

    what = "query" if queries else "document"
    if not texts:
        return np.zeros((0, _width(embedder) or 0), dtype=np.float32)
    # ``bounds_itself``: True for an embedder whose every call has its own limit (the HTTP
    # service's requests), "documents" for one whose document calls do (Ray's; its queries are
    # the local model's).
    bounds = getattr(embedder, "bounds_itself", False)
    own = bounds is True or (bounds == "documents" and not queries)
    entry = f"system.{call.system}"
    try:
        if bounded and not own and isinstance(embedder, LazyEmbedder):
            with library_failures("loading the model", path=call.path, entry=entry):
                _ = embedder.model  # loaded untimed: a download or a distillation is not encoding
    except RetrievalGateError as exc:
        exc.located(call.path, entry)
        raise
    batches = 1 if queries else math.ceil(len(texts) / max(1, call.batch_size))
    limit = None if (own or not bounded or not call.timeout) else call.timeout * batches

    def run() -> Any:
        if queries:
            return embedder.encode_queries(list(texts))
        return embedder.encode_documents(list(texts), progress=progress)

    try:
        # A library failing underneath (a tokenizer, torch, onnxruntime, a plug-in's own code)
        # is that library's one line naming the texts; the plugin's own bug stays internal.
        with library_failures(_doing(what, texts, names), path=call.path, entry=entry):
            raw = call.bounded(run, limit) if limit else run()
    except LibraryError as exc:
        if queries or names is None or len(texts) < 2:
            raise
        # Which document? A tokenizer that fails on one text fails on it alone: halving the
        # batch finds it (about as many texts again as the failed call, only on failure).
        found = _failing_text(embedder, texts, call, bounded=bool(limit))
        if found is None:
            raise
        position, error = found
        doing = f"embedding document {shown(names[position])!r}"
        alone = library_error(error, doing, path=call.path, entry=entry)
        raise (alone or exc) from (error if alone else exc.__cause__)
    except RetrievalGateError as exc:
        # A lazily loaded model's error (a missing file, a device that is not there) is
        # raised here, far from where the system was opened: it names the system too.
        exc.located(call.path, f"system.{call.system}")
        raise
    except CallTimeout:
        per = "" if queries else f" per batch of {counted(call.batch_size, 'text')}"
        raise call.error(
            f"did not return {counted(len(texts), f'{what} vector')} within {limit:g} s (the "
            "system's "
            f"'timeout', {call.timeout:g} s{per}); check the embedder, or raise 'timeout'"
        ) from None
    return check_rows(raw, len(texts), _width(embedder), what=what, call=call, names=names)


def _failing_text(
    embedder: Any, texts: Sequence[str], call: EmbeddingCall, *, bounded: bool
) -> tuple[int, Exception] | None:
    """The position of a text whose encoding fails alone, and what it raised, found by
    halving ``texts`` (each part under the call's time limit); None when no text fails alone
    (the failure needs the batch), another text fails alone too (a model that fails on every
    text: no one document to name), or a part does not return in time."""

    def error_of(part: Sequence[str]) -> Exception | None:
        batches = math.ceil(len(part) / max(1, call.batch_size))
        limit = call.timeout * batches if bounded and call.timeout else None
        try:
            call.bounded(lambda: embedder.encode_documents(list(part)), limit)
        except CallTimeout:
            raise
        except Exception as exc:
            exc.__suppress_context__ = True  # its own traceback, not the batch's again
            return exc
        return None

    low, high = 0, len(texts)  # the culprit lies in texts[low:high]
    try:
        while high - low > 1:
            middle = (low + high) // 2
            if error_of(texts[low:middle]) is not None:
                high = middle
            else:
                low = middle
        error = error_of(texts[low:high])
        other = len(texts) - 1 if low == 0 else 0
        if error is None or error_of(texts[other : other + 1]) is not None:
            return None
    except CallTimeout:
        return None
    return low, error


def _doing(what: str, texts: Sequence[str], names: Sequence[str] | None) -> str:
    """What an encoder call was doing, for a library's failure in it: the text by its id when
    there is one, else the first few of the batch."""
    if names is None:
        return f"embedding {counted(len(texts), f'{what} text')}"
    if len(names) == 1:
        return f"embedding {what} {shown(names[0])!r}"
    listed = ", ".join(repr(shown(name)) for name in names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"embedding {len(names)} {what}s ({listed}{more})"


def check_rows(
    raw: Any,
    rows: int,
    width: int | None,
    *,
    what: str,
    call: EmbeddingCall,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """``raw`` as float32 ``[rows, width]`` with finite values, else the call's one line (the
    first bad row named by its id in ``names`` when given, else by its position)."""
    if raw is None:  # numpy would read it as one NaN
        raise call.error(
            f"returned None for {counted(rows, f'{what} text')}; expected a [{rows}, dim] array"
        )
    try:
        array = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise call.error(
            f"returned {type(raw).__name__} for {counted(rows, 'text')}, not a [texts, dim] "
            "array of "
            f"numbers ({' '.join(str(exc).split())})"
        ) from None
    if array.ndim != 2:
        raise call.error(
            f"returned an array of shape {array.shape} for {counted(rows, f'{what} text')}; "
            "expected "
            f"[{rows}, dim]"
        )
    if array.shape[0] != rows:
        raise call.error(
            f"returned {counted(array.shape[0], f'{what} vector')} for {counted(rows, 'text')}"
        )
    if array.shape[1] == 0:
        raise call.error(f"returned {what} vectors of width 0")
    if width is not None and array.shape[1] != width:
        raise call.error(
            f"returned {array.shape[1]}-dimensional {what} vectors; it said its vectors are "
            f"{width}-dimensional"
        )
    # In row blocks: a million rows need no full boolean temporary.
    bad, first = 0, -1
    for start in range(0, rows, 65536):
        block = ~np.isfinite(array[start : start + 65536]).all(axis=1)
        if block.any():
            first = first if first >= 0 else start + int(np.flatnonzero(block)[0])
            bad += int(block.sum())
    if bad:
        at = f"for {what} {shown(names[first])!r}" if names is not None else f"at row {first}"
        raise call.error(
            f"returned NaN or infinite values in {bad} of {counted(rows, f'{what} vector')} "
            f"(the first {at})"
        )
    return np.ascontiguousarray(array)


def zero_rows(vectors: Any) -> int:
    """How many rows of ``vectors`` are all zero (counted in blocks: no full temporary)."""
    array = np.asarray(vectors)
    if array.ndim != 2 or array.shape[0] == 0:
        return 0
    count = 0
    for start in range(0, array.shape[0], 65536):
        count += int((~array[start : start + 65536].any(axis=1)).sum())
    return count


def zero_vectors_warning(call: EmbeddingCall, zeros: int, total: int, *, what: str) -> str:
    """The one line said when ``zeros`` of ``total`` vectors are all zero: how many, and what
    the system's index does with a vector that has no direction."""
    where = f"{call.path} [system.{call.system}]" if call.path else f"[system.{call.system}]"
    return (
        f"{where}: embedder {call.embedder!r} returned {zeros} all-zero {what} "
        f"{plural(zeros, 'vector')} of {total}: {call.zero_effect}"
    )
