"""Ranking metrics that agree with trec_eval 10, computed with numpy over all queries at once.

The registry (``REGISTRY``) declares every metric family: its canonical name, whether it takes a
cutoff, the trec_eval measure it reproduces, its aliases and its definition. ``parse_metric`` turns
``"nDCG@10"`` into a :class:`Metric`; unknown names are rejected with the registry's own list.

Two entry points share one numeric kernel (:func:`compute`):

* the plugin ranks each query once (:func:`rank_scored`), builds a :class:`Judged` with
  :func:`judge` and calls :func:`compute` for every gate and report metric;
* :func:`evaluate` takes pytrec_eval-shaped dicts, builds the same :class:`Judged` straight from
  the scores (no per-document Python work for unjudged documents) and calls :func:`compute`.

trec_eval conventions reproduced here (checked against its source, ``usnistgov/trec_eval``):

* Ranking is by score descending, ties by document id descending (``strcmp`` order; Python's
  ``str`` order is the same for UTF-8 ids). The rank column of a TREC run is ignored.
* Relevant means grade >= 1 (``-l 1``, the default ``relevance_level``).
* Grade 0 is judged non-relevant: it adds nothing to any metric and nothing to the ideal DCG.
* A negative grade means "in the pool but not judged" (``form_res_rels.c``): such a document is
  not relevant, has gain 0, and is not counted among the judged levels, so it is not in the ideal
  ranking either. Here it is treated exactly like an unjudged document.
* nDCG gain is the grade itself (linear); the ideal ranking is built from every judged document
  with grade > 0, retrieved or not. The discount is ``log2(rank + 1)`` for rank 1, 2, ...
  (``m_ndcg_cut.c``; old releases left ranks 1 and 2 undiscounted, trec_eval 9.0.5+ does not).
* A query without relevant documents scores 0 everywhere (trec_eval leaves the value at 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from retrieval_gate.errors import UnknownMetricError

__all__ = [
    "LATENCY_METRICS",
    "REGISTRY",
    "Judged",
    "Metric",
    "MetricFamily",
    "compute",
    "cutoff_metrics",
    "evaluate",
    "judge",
    "latency_stats",
    "parse_metric",
    "rank_scored",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GAINS = ("linear", "exponential")


@dataclass(frozen=True)
class MetricFamily:
    """One metric family as the registry declares it.

    ``trec_name`` is the trec_eval measure reproduced by the cutoff form (``{k}`` stands for the
    cutoff), ``trec_name_full`` the one reproduced by the form without a cutoff.
    """

    name: str
    needs_k: bool
    takes_k: bool
    trec_name: str
    description: str
    aliases: tuple[str, ...] = ()
    trec_name_full: str | None = None
    higher_is_better: bool = True
    is_latency: bool = False

    @property
    def forms(self) -> tuple[str, ...]:
        """The spellings this family accepts, as shown to users: ``("MRR@k", "MRR")``."""
        forms: list[str] = []
        if self.takes_k:
            forms.append(f"{self.name}@k")
        if not self.needs_k:
            forms.append(self.name)
        return tuple(forms)


def _family(
    name: str,
    *,
    needs_k: bool,
    takes_k: bool,
    trec_name: str,
    description: str,
    aliases: Iterable[str] = (),
    trec_name_full: str | None = None,
    higher_is_better: bool = True,
    is_latency: bool = False,
) -> tuple[str, MetricFamily]:
    return name, MetricFamily(
        name=name,
        needs_k=needs_k,
        takes_k=takes_k,
        trec_name=trec_name,
        description=description,
        aliases=tuple(aliases),
        trec_name_full=trec_name_full,
        higher_is_better=higher_is_better,
        is_latency=is_latency,
    )


_LATENCY_DESCRIPTION = (
    "{what} per-query wall time in milliseconds of query embedding plus search, measured after "
    "warm-up; model loading and indexing are excluded. A ceiling: lower is better. Percentiles "
    "use numpy's linear interpolation; no queries gives 0."
)

REGISTRY: Mapping[str, MetricFamily] = dict(
    [
        _family(
            "P",
            needs_k=True,
            takes_k=True,
            trec_name="P_{k}",
            aliases=("p", "precision"),
            description=(
                "Precision at k: (relevant documents in the top k) / k. Divides by k even when "
                "fewer than k were retrieved. 0 for an empty ranking."
            ),
        ),
        _family(
            "R",
            needs_k=False,
            takes_k=True,
            trec_name="recall_{k}",
            trec_name_full="set_recall",
            aliases=("r", "recall"),
            description=(
                "Recall at k: (relevant documents in the top k) / (all relevant documents of the "
                "query, retrieved or not). Without k: over everything retrieved. 0 when the query "
                "has no relevant document."
            ),
        ),
        _family(
            "MRR",
            needs_k=False,
            takes_k=True,
            trec_name="recip_rank on the ranking cut at k",
            trec_name_full="recip_rank",
            aliases=("mrr", "rr", "recip_rank"),
            description=(
                "Reciprocal rank: 1 / rank of the first relevant document if it is within the top "
                "k, else 0. Without k: anywhere in the ranking (trec_eval recip_rank, which has no "
                "cutoff). The mean over queries is the MRR."
            ),
        ),
        _family(
            "nDCG",
            needs_k=False,
            takes_k=True,
            trec_name="ndcg_cut_{k}",
            trec_name_full="ndcg",
            aliases=("ndcg", "ndcg_cut"),
            description=(
                "Normalised DCG at k: DCG@k / IDCG@k with DCG@k = sum over ranks i <= k of "
                "gain(grade_i) / log2(i + 1), gain = grade (linear, trec_eval) or 2**grade - 1 "
                "(exponential). IDCG@k is the DCG@k of the ideal ranking of every judged document "
                "with grade > 0, retrieved or not. Grades <= 0 and unjudged documents have gain "
                "0. 0 when IDCG is 0."
            ),
        ),
        _family(
            "MAP",
            needs_k=False,
            takes_k=True,
            trec_name="map_cut_{k}",
            trec_name_full="map",
            aliases=("map", "ap"),
            description=(
                "Average precision truncated at k: sum over relevant documents at rank i <= k of "
                "(relevant in the top i) / i, divided by the number of relevant documents of the "
                "query (all of them, not min(k, R)). The mean over queries is the MAP. 0 when "
                "the query has no relevant document."
            ),
        ),
        _family(
            "Hit",
            needs_k=True,
            takes_k=True,
            trec_name="success_{k}",
            aliases=("hit", "hits", "success", "hit_rate"),
            description="Success at k: 1 if any relevant document is in the top k, else 0.",
        ),
        _family(
            "R-Prec",
            needs_k=False,
            takes_k=False,
            trec_name="Rprec",
            aliases=("r-prec", "rprec", "r-precision"),
            description=(
                "R-precision: (relevant documents in the top R) / R, where R is the number of "
                "relevant documents of the query; the point where precision equals recall. 0 "
                "when the query has no relevant document."
            ),
        ),
        _family(
            "latency_p50_ms",
            needs_k=False,
            takes_k=False,
            trec_name="",
            higher_is_better=False,
            is_latency=True,
            description=_LATENCY_DESCRIPTION.format(what="Median"),
        ),
        _family(
            "latency_p95_ms",
            needs_k=False,
            takes_k=False,
            trec_name="",
            higher_is_better=False,
            is_latency=True,
            description=_LATENCY_DESCRIPTION.format(what="95th percentile of the"),
        ),
        _family(
            "latency_p99_ms",
            needs_k=False,
            takes_k=False,
            trec_name="",
            higher_is_better=False,
            is_latency=True,
            description=_LATENCY_DESCRIPTION.format(what="99th percentile of the"),
        ),
        _family(
            "latency_mean_ms",
            needs_k=False,
            takes_k=False,
            trec_name="",
            higher_is_better=False,
            is_latency=True,
            description=_LATENCY_DESCRIPTION.format(what="Mean"),
        ),
    ]
)

LATENCY_METRICS: tuple[str, ...] = tuple(f.name for f in REGISTRY.values() if f.is_latency)

# Cutoff families in the order the JSON report stores them (see cutoff_metrics).
_CUTOFF_ORDER: tuple[str, ...] = ("P", "R", "MRR", "nDCG", "MAP", "Hit")

_ALIASES: dict[str, str] = {}
for _f in REGISTRY.values():
    for _alias in (_f.name, *_f.aliases):
        _ALIASES[_alias.lower()] = _f.name


def _known() -> str:
    return ", ".join(form for f in REGISTRY.values() for form in f.forms)


@dataclass(frozen=True)
class Metric:
    """A metric family with an optional cutoff: ``Metric("nDCG", 10)`` is ``nDCG@10``."""

    family: str
    k: int | None = None

    def __post_init__(self) -> None:
        spec = REGISTRY.get(self.family)
        if spec is None:
            raise UnknownMetricError(f"unknown metric family {self.family!r}; known: {_known()}")
        if self.k is None:
            if spec.needs_k:
                raise UnknownMetricError(
                    f"metric {self.family!r} needs a cutoff, e.g. {self.family}@10; "
                    f"known: {_known()}"
                )
        elif not spec.takes_k:
            raise UnknownMetricError(f"metric {self.family!r} takes no cutoff; known: {_known()}")
        elif isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise UnknownMetricError(
                f"bad cutoff {self.k!r} for {self.family!r}: k must be an integer >= 1; "
                f"known: {_known()}"
            )

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"

    @property
    def spec(self) -> MetricFamily:
        return REGISTRY[self.family]

    @property
    def is_latency(self) -> bool:
        return self.spec.is_latency

    @property
    def higher_is_better(self) -> bool:
        return self.spec.higher_is_better

    def __str__(self) -> str:
        return self.name


def parse_metric(text: str) -> Metric:
    """Parse ``"nDCG@10"``, ``"p@5"``, ``"success@1"``, ``"R-Prec"``, ``"latency_p95_ms"``.

    Family names and aliases are case-insensitive; the cutoff must be an integer >= 1.
    Raises :class:`~retrieval_gate.errors.UnknownMetricError` quoting ``text`` and listing the
    registry's metrics.
    """
    if not isinstance(text, str):
        raise UnknownMetricError(f"metric must be a string, got {text!r}; known: {_known()}")
    raw = text.strip()
    head, at, tail = raw.partition("@")
    family = _ALIASES.get(head.strip().lower())
    if family is None:
        raise UnknownMetricError(f"unknown metric {text!r}; known: {_known()}")
    spec = REGISTRY[family]
    if not at:
        if spec.needs_k:
            raise UnknownMetricError(
                f"metric {text!r} needs a cutoff, e.g. {family}@10; known: {_known()}"
            )
        return Metric(family, None)
    if not spec.takes_k:
        raise UnknownMetricError(f"metric {text!r} takes no cutoff; known: {_known()}")
    cutoff = tail.strip()
    # str.isdigit accepts non-ASCII digits such as "²", which int() then rejects.
    if not (cutoff.isascii() and cutoff.isdigit()) or int(cutoff) < 1:
        raise UnknownMetricError(
            f"bad cutoff in metric {text!r}: k must be an integer >= 1; known: {_known()}"
        )
    return Metric(family, int(cutoff))


def _as_metric(metric: str | Metric) -> Metric:
    return metric if isinstance(metric, Metric) else parse_metric(metric)


def cutoff_metrics(ks: Sequence[int]) -> list[Metric]:
    """Every ranking family at every cutoff in ``ks``, then ``R-Prec``.

    Family-major order: ``P@k1, P@k2, R@k1, R@k2, MRR@..., nDCG@..., MAP@..., Hit@..., R-Prec``;
    duplicate cutoffs are dropped, the given order of ``ks`` is kept.
    """
    unique = list(dict.fromkeys(ks))
    metrics = [Metric(family, k) for family in _CUTOFF_ORDER for k in unique]
    metrics.append(Metric("R-Prec"))
    return metrics


def rank_scored(scores: Mapping[str, float]) -> list[str]:
    """Document ids in trec_eval order: score descending, ties by document id descending."""
    return sorted(scores, key=lambda doc: (scores[doc], doc), reverse=True)


@dataclass(frozen=True, eq=False)
class Judged:
    """The judged rankings of a set of queries, as dense arrays.

    ``grades[i, j]`` is the grade of the document at rank ``j + 1`` of query ``i`` (0 for an
    unjudged or negatively graded document and for the padding past ``lengths[i]``);
    ``n_rel[i]`` counts the query's judged documents with grade >= 1; ``ideal[i]`` holds its
    judged grades > 0 sorted descending, 0-padded.
    """

    grades: FloatArray
    lengths: IntArray
    n_rel: IntArray
    ideal: FloatArray
    qids: tuple[str, ...] = field(default=())

    @property
    def n_queries(self) -> int:
        return int(self.grades.shape[0])


_NO_JUDGMENTS: Mapping[str, int] = {}
_NO_SCORES: Mapping[str, float] = {}


def _ragged(values: Iterable[float], lengths: IntArray, width: int) -> FloatArray:
    """Rows of ``lengths[i]`` values each, laid out as a 0-padded ``[n, width]`` matrix."""
    n = int(lengths.shape[0])
    total = int(lengths.sum())
    flat = np.fromiter(values, dtype=np.float64, count=total)
    if n and total == n * width:
        return flat.reshape(n, width)
    out = np.zeros((n, width), dtype=np.float64)
    out[np.arange(width) < lengths[:, None]] = flat
    return out


def _assemble(
    judgments: Sequence[Mapping[str, int]],
    grades: FloatArray,
    lengths: IntArray,
    qids: Sequence[str],
) -> Judged:
    """Add the per-query relevant counts and ideal gains to a grade matrix."""
    n = len(judgments)
    counts = np.fromiter(map(len, judgments), dtype=np.int64, count=n)
    flat = np.fromiter(
        chain.from_iterable(j.values() for j in judgments),
        dtype=np.float64,
        count=int(counts.sum()),
    )
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    n_rel = np.bincount(owner[flat >= 1.0], minlength=n).astype(np.int64)
    # Grades <= 0 are not part of the ideal ranking (trec_eval counts only levels >= 0 and a
    # level-0 document has gain 0).
    positive = flat > 0.0
    owner, flat = owner[positive], flat[positive]
    order = np.lexsort((-flat, owner))
    owner, flat = owner[order], flat[order]
    per_query = np.bincount(owner, minlength=n)
    starts = np.cumsum(per_query) - per_query
    ideal = np.zeros((n, int(per_query.max()) if n else 0), dtype=np.float64)
    ideal[owner, np.arange(owner.shape[0]) - starts[owner]] = flat
    return Judged(grades=grades, lengths=lengths, n_rel=n_rel, ideal=ideal, qids=tuple(qids))


def judge(
    qrels: Mapping[str, Mapping[str, int]],
    qids: Sequence[str],
    rankings: Sequence[Sequence[str]],
) -> Judged:
    """Look up the grade of every ranked document.

    ``rankings[i]`` is the already ordered document list of ``qids[i]`` (see
    :func:`rank_scored`); an empty ranking is fine and scores 0. A query absent from ``qrels``
    has no relevant document. Grades <= 0 are stored as 0: a negative grade means "in the pool
    but unjudged" to trec_eval, which then treats the document like any unjudged one. A document
    listed twice in one ranking is a ``ValueError``, as in trec_eval, because it would be
    counted twice.
    """
    if len(qids) != len(rankings):
        raise ValueError(f"{len(qids)} query ids but {len(rankings)} rankings")
    judgments = [qrels.get(q, _NO_JUDGMENTS) for q in qids]
    hit_q: list[int] = []
    hit_rank: list[int] = []
    hit_grade: list[float] = []
    for i, (qid, judged, ranking) in enumerate(zip(qids, judgments, rankings, strict=True)):
        position = dict(zip(ranking, range(len(ranking)), strict=True))
        if len(position) != len(ranking):
            raise ValueError(f"query {qid!r}: the ranking lists a document more than once")
        # Only the judged documents are looked up, not the (mostly unjudged) ranking.
        found = judged.keys() & position.keys()
        if found:
            hit_q.extend(repeat(i, len(found)))
            hit_rank.extend(map(position.__getitem__, found))
            hit_grade.extend(map(judged.__getitem__, found))
    lengths = np.fromiter(map(len, rankings), dtype=np.int64, count=len(rankings))
    width = int(lengths.max()) if len(rankings) else 0
    grades = np.zeros((len(rankings), width), dtype=np.float64)
    grade = np.asarray(hit_grade, dtype=np.float64)
    # Grades <= 0 stay 0: a negative grade means "in the pool but unjudged" to trec_eval.
    keep = grade > 0.0
    grades[np.asarray(hit_q, dtype=np.int64)[keep], np.asarray(hit_rank, dtype=np.int64)[keep]] = (
        grade[keep]
    )
    return _assemble(judgments, grades, lengths, qids)


# Rows of the score matrix compared at once while ranking judged documents; bounds the
# temporary boolean matrices to a few tens of MB whatever the run size.
_CHUNK_CELLS = 1 << 22


def _judge_scored(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    qids: Sequence[str],
) -> Judged:
    """Build a :class:`Judged` straight from scores, without sorting any ranking.

    Only documents with grade > 0 change a metric, so only their ranks are needed. The rank of
    such a document is 1 + (documents scored higher) + (tied documents with a larger id), which
    numpy counts for all of them at once; only ties that involve such a document go through
    Python. This gives trec_eval's order without sorting the (mostly unjudged) run.
    """
    runs = [run.get(q, _NO_SCORES) for q in qids]
    judgments = [qrels.get(q, _NO_JUDGMENTS) for q in qids]
    n = len(runs)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=n)
    width = int(lengths.max()) if n else 0
    total = int(lengths.sum())
    flat = np.fromiter(chain.from_iterable(r.values() for r in runs), dtype=np.float64, count=total)
    if np.isnan(flat).any():
        raise ValueError("the run contains NaN scores, which have no rank")
    if n and total == n * width:
        scores = flat.reshape(n, width)
    else:
        # -inf padding is never above a real score; ties with it are resolved in Python below,
        # where the padding does not exist.
        scores = np.full((n, width), -np.inf)
        scores[np.arange(width) < lengths[:, None]] = flat
    del flat

    hit_q: list[int] = []
    hit_doc: list[str] = []
    hit_score: list[float] = []
    hit_grade: list[float] = []
    for i, (judged, ranked) in enumerate(zip(judgments, runs, strict=True)):
        # dict-view intersection iterates the smaller side: about |judged| lookups, not |run|.
        found = judged.keys() & ranked.keys()
        if found:
            hit_q.extend(repeat(i, len(found)))
            hit_doc.extend(found)
            hit_score.extend(map(ranked.__getitem__, found))
            hit_grade.extend(map(judged.__getitem__, found))

    grades = np.zeros((n, width), dtype=np.float64)
    grade = np.asarray(hit_grade, dtype=np.float64)
    keep = np.flatnonzero(grade > 0.0)
    if keep.size:
        rows = np.asarray(hit_q, dtype=np.int64)[keep]
        value = np.asarray(hit_score, dtype=np.float64)[keep]
        m = int(keep.size)
        above = np.empty(m, dtype=np.int64)
        tied = np.empty(m, dtype=np.int64)
        step = max(1, _CHUNK_CELLS // max(width, 1))
        for start in range(0, m, step):
            stop = min(start + step, m)
            block = scores[rows[start:stop]]
            v = value[start:stop, None]
            above[start:stop] = np.count_nonzero(block > v, axis=1)
            tied[start:stop] = np.count_nonzero(block == v, axis=1)
        for j in np.flatnonzero(tied > 1).tolist():
            h = int(keep[j])
            doc, s = hit_doc[h], hit_score[h]
            above[j] += sum(1 for d, v2 in runs[hit_q[h]].items() if v2 == s and d > doc)
        grades[rows, above] = grade[keep]
    return _assemble(judgments, grades, lengths, qids)


def _safe_div(num: FloatArray, den: npt.NDArray[Any]) -> FloatArray:
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


class _Kernel:
    """Per-query intermediate arrays, each computed once and only when a metric needs it."""

    def __init__(self, judged: Judged, gain: str, depth: int) -> None:
        self.judged = judged
        self.gain = gain
        self.n = judged.n_queries
        self.depth = depth
        self.grades = judged.grades[:, :depth]
        self._cache: dict[str, npt.NDArray[Any]] = {}

    def _memo(self, key: str) -> npt.NDArray[Any] | None:
        return self._cache.get(key)

    @property
    def relevant(self) -> npt.NDArray[np.bool_]:
        got = self._memo("relevant")
        if got is None:
            got = self._cache["relevant"] = self.grades >= 1.0
        return got

    @property
    def cum_relevant(self) -> IntArray:
        got = self._memo("cum_relevant")
        if got is None:
            got = self._cache["cum_relevant"] = np.cumsum(self.relevant, axis=1, dtype=np.int64)
        return got

    @property
    def cum_precision(self) -> FloatArray:
        # Sequential accumulation (ufunc.accumulate) adds the same terms in the same order as
        # trec_eval's loop, so sums match it bit for bit; adding 0.0 for non-relevant ranks is
        # exact.
        got = self._memo("cum_precision")
        if got is None:
            ranks = np.arange(1, self.depth + 1, dtype=np.int64)
            precision = np.where(self.relevant, self.cum_relevant / ranks, 0.0)
            got = self._cache["cum_precision"] = np.cumsum(precision, axis=1)
        return got

    def _gains(self, grades: FloatArray) -> FloatArray:
        if self.gain == "exponential":
            return np.exp2(grades) - 1.0
        return grades

    @staticmethod
    def _cum_dcg(gains: FloatArray) -> FloatArray:
        discount = np.log2(np.arange(2, gains.shape[1] + 2, dtype=np.float64))
        return np.cumsum(gains / discount, axis=1)

    @property
    def cum_dcg(self) -> FloatArray:
        got = self._memo("cum_dcg")
        if got is None:
            got = self._cache["cum_dcg"] = self._cum_dcg(self._gains(self.grades))
        return got

    @property
    def cum_idcg(self) -> FloatArray:
        got = self._memo("cum_idcg")
        if got is None:
            got = self._cache["cum_idcg"] = self._cum_dcg(self._gains(self.judged.ideal))
        return got

    @staticmethod
    def at(cumulative: npt.NDArray[Any], k: int | None) -> FloatArray:
        """Column ``min(k, width)`` (1-based) of a cumulative matrix; 0 for an empty matrix."""
        width = cumulative.shape[1]
        if width == 0:
            return np.zeros(cumulative.shape[0], dtype=np.float64)
        col = width if k is None else min(k, width)
        return np.asarray(cumulative[:, col - 1], dtype=np.float64)

    def metric(self, metric: Metric) -> FloatArray:
        family, k = metric.family, metric.k
        n_rel = self.judged.n_rel
        if family == "P":
            return self.at(self.cum_relevant, k) / float(k or 1)
        if family == "R":
            return _safe_div(self.at(self.cum_relevant, k), n_rel)
        if family == "Hit":
            return (self.at(self.cum_relevant, k) > 0).astype(np.float64)
        if family == "MRR":
            rr = np.zeros(self.n, dtype=np.float64)
            if self.depth:
                first = np.argmax(self.relevant, axis=1)
                found = self.relevant[np.arange(self.n), first]
                if k is not None:
                    found &= first < k
                rr[found] = 1.0 / (first[found] + 1.0)
            return rr
        if family == "MAP":
            return _safe_div(self.at(self.cum_precision, k), n_rel)
        if family == "nDCG":
            return _safe_div(self.at(self.cum_dcg, k), self.at(self.cum_idcg, k))
        if family == "R-Prec":
            out = np.zeros(self.n, dtype=np.float64)
            if self.depth:
                col = np.minimum(n_rel, self.depth) - 1
                has = col >= 0
                rows = np.flatnonzero(has)
                out[has] = self.cum_relevant[rows, col[has]] / n_rel[has]
            return out
        raise ValueError(f"{metric.name} is not a ranking metric")


def compute(
    judged: Judged, metrics: Sequence[Metric], *, gain: str = "linear"
) -> dict[str, FloatArray]:
    """Per-query values of each metric, keyed by its canonical name.

    Vectorised over all queries; see ``REGISTRY[family].description`` for each definition.
    ``gain`` is ``"linear"`` (trec_eval: gain = grade) or ``"exponential"`` (2**grade - 1) and
    only affects nDCG. Latency metrics are not computed from rankings: ``ValueError``.
    """
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {', '.join(GAINS)}, got {gain!r}")
    for metric in metrics:
        if metric.is_latency:
            raise ValueError(
                f"{metric.name} is a latency metric; use latency_stats() on measured times"
            )
    width = int(judged.grades.shape[1])
    # Cutoff forms only need the first k ranks; the no-cutoff forms and R-Prec need them all.
    needs_all = any(m.k is None for m in metrics)
    depth = width if needs_all else min(width, max((m.k or 0 for m in metrics), default=0))
    kernel = _Kernel(judged, gain, depth)
    return {metric.name: kernel.metric(metric) for metric in metrics}


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str | Metric],
    *,
    gain: str = "linear",
) -> dict[str, dict[str, float]]:
    """Evaluate a run against judgments: ``{qid: {metric_name: value}}``.

    Same shapes as pytrec_eval, ranx and ir_measures: ``qrels = {qid: {doc_id: grade}}``,
    ``run = {qid: {doc_id: score}}``, ``metrics = ["nDCG@10", "P@5", ...]``. Every query of
    ``qrels`` is returned (a query missing from the run scores 0, like ``trec_eval -c``); run
    queries without judgments are ignored. Result keys are canonical names (``"ndcg@10"`` comes
    back as ``"nDCG@10"``). Ranking follows trec_eval: score descending, ties by document id
    descending. Goes through the same :func:`compute` as the plugin.

    >>> evaluate({"q1": {"a": 1}}, {"q1": {"a": 0.2, "b": 0.9}}, ["P@1", "MRR"])
    {'q1': {'P@1': 0.0, 'MRR': 0.5}}
    """
    parsed = list(dict.fromkeys(_as_metric(m) for m in metrics))
    qids = list(qrels)
    judged = _judge_scored(qrels, run, qids)
    values = compute(judged, parsed, gain=gain)
    names = list(values)
    if not names:
        return {q: {} for q in qids}
    # One tolist() of a [queries, metrics] matrix is far cheaper than a float() per value.
    table = np.column_stack([values[name] for name in names]).tolist()
    return {q: dict(zip(names, row, strict=True)) for q, row in zip(qids, table, strict=True)}


def latency_stats(ms: Sequence[float]) -> dict[str, float]:
    """``{"p50", "p95", "p99", "mean"}`` of per-query times in ms; all 0.0 when there are none.

    Percentiles use numpy's default linear interpolation between closest ranks.
    """
    values = np.asarray(ms, dtype=np.float64)
    if values.size == 0:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0}
    p50, p95, p99 = (float(x) for x in np.percentile(values, [50.0, 95.0, 99.0]))
    return {"p50": p50, "p95": p95, "p99": p99, "mean": float(values.mean())}
