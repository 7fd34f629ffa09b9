"""Ranking order and judged rankings: the one tie policy and the arrays every metric reads.

:func:`rank_scored` is the single definition of the order (trec_eval's: score descending, ties
by document id descending); :func:`judge` turns ordered rankings into a :class:`Judged`, and
:func:`_judge_scored` builds the same :class:`Judged` straight from score dicts, counting ranks
under the same policy instead of sorting.

trec_eval conventions reproduced here (checked against its source, ``usnistgov/trec_eval``):

* The rank column of a TREC run is ignored; only scores and document ids order a ranking.
* Grade 0 is judged non-relevant. A negative grade means "in the pool but not judged"
  (``form_res_rels.c``): such a document is treated exactly like an unjudged one (grade 0 in
  ``Judged.grades``, not counted in ``n_rel``, not in ``ideal``).
* A document listed twice in one ranking is an error (trec_eval refuses it too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat

import numpy as np
import numpy.typing as npt

__all__ = ["Judged", "judge", "rank_scored"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def rank_scored(scores: Mapping[str, float]) -> list[str]:
    """Document ids in trec_eval order: score descending, ties by document id descending.

    The one tie policy of the plugin: every ranking it evaluates or reports goes through this
    function, and :func:`_judge_scored` computes the same ranks without sorting. Document ids
    compare as Python strings, which for UTF-8 ids is trec_eval's ``strcmp`` byte order.
    """
    return sorted(scores, key=lambda doc: (scores[doc], doc), reverse=True)


@dataclass(frozen=True, eq=False)
class Judged:
    """The judged rankings of a set of queries, as dense arrays.

    ``grades[i, j]`` is the grade of the document at rank ``j + 1`` of query ``i`` (0 for an
    unjudged or negatively graded document and for the padding past ``lengths[i]``);
    ``n_rel[i]`` counts the query's judged documents with grade >= 1; ``ideal[i]`` holds its
    judged grades > 0 sorted descending, 0-padded. ``assessed[i, j]`` is True when the document
    at rank ``j + 1`` has a judgment with grade >= 0 (relevant or judged non-relevant; a
    negative grade is "in the pool but not judged" and is False, like an unjudged document);
    ``None`` when the builder did not record it (only ``Judged@k`` reads it).
    """

    grades: FloatArray
    lengths: IntArray
    n_rel: IntArray
    ideal: FloatArray
    qids: tuple[str, ...] = field(default=())
    assessed: BoolArray | None = None

    @property
    def n_queries(self) -> int:
        return int(self.grades.shape[0])


_NO_JUDGMENTS: Mapping[str, int] = {}
_NO_SCORES: Mapping[str, float] = {}


def _assemble(
    judgments: Sequence[Mapping[str, int]],
    grades: FloatArray,
    lengths: IntArray,
    qids: Sequence[str],
    assessed: BoolArray | None,
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
    return Judged(
        grades=grades,
        lengths=lengths,
        n_rel=n_rel,
        ideal=ideal,
        qids=tuple(qids),
        assessed=assessed,
    )


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
    rows = np.asarray(hit_q, dtype=np.int64)
    cols = np.asarray(hit_rank, dtype=np.int64)
    # Grades <= 0 stay 0: a negative grade means "in the pool but unjudged" to trec_eval.
    keep = grade > 0.0
    grades[rows[keep], cols[keep]] = grade[keep]
    assessed = np.zeros((len(rankings), width), dtype=np.bool_)
    seen = grade >= 0.0
    assessed[rows[seen], cols[seen]] = True
    return _assemble(judgments, grades, lengths, qids, assessed)


# Rows of the score matrix compared at once while ranking judged documents; bounds the
# temporary boolean matrices to a few tens of MB whatever the run size.
_CHUNK_CELLS = 1 << 22


def _judge_scored(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    qids: Sequence[str],
    *,
    assessed: bool = False,
) -> Judged:
    """Build a :class:`Judged` straight from scores, without sorting any ranking.

    ``assessed``: also rank the grade-0 documents and fill :attr:`Judged.assessed` (else None).

    Implements the tie policy of :func:`rank_scored` (score descending, then document id
    descending), and must give exactly ``judge(qrels, qids, [rank_scored(run[q]) for q in
    qids])``; tests/metrics/test_ranking.py checks this on random runs full of ties.

    Only documents with grade > 0 change a metric, so only their ranks are needed. In
    :func:`rank_scored` order the 0-based rank of document ``d`` with score ``s`` is
    (documents with score > s) + (documents with score == s and id > d), which numpy counts for
    all such documents at once; the second count goes through Python only for the documents
    whose score is tied with another. This gives trec_eval's order without sorting the (mostly
    unjudged) run.
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
    # Grade-0 documents change no metric but Judged@k, and a TREC qrels file can hold hundreds of
    # them per query: they are ranked only when asked for.
    keep = np.flatnonzero(grade >= 0.0 if assessed else grade > 0.0)
    marks = np.zeros((n, width), dtype=np.bool_) if assessed else None
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
        grades[rows, above] = np.maximum(grade[keep], 0.0)
        if marks is not None:
            marks[rows, above] = True
    return _assemble(judgments, grades, lengths, qids, marks)
