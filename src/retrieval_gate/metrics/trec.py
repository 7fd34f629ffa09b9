"""The ranking metrics that reproduce trec_eval 10: P, R, MRR, nDCG, MAP, Hit, R-Prec.

Each family's ``description`` below is its definition (rendered into docs/metrics.md); its
``compute`` reads the shared :class:`~retrieval_gate.metrics.kernel.Kernel`. Notation: ``rel_i``
is 1 when the document at rank ``i`` (1-based) is relevant (grade >= 1), ``g_i`` its grade (0
when unjudged or negative), ``R`` the number of relevant documents of the query (judged, grade
>= 1, retrieved or not). A query without relevant documents scores 0 everywhere, as trec_eval
leaves it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.kernel import Kernel, safe_div
from retrieval_gate.metrics.registry import Metric, MetricFamily

__all__ = ["FAMILIES", "cutoff_metrics"]

FloatArray = npt.NDArray[np.float64]

ORDER = 10  # first in the registry, error messages and docs
VERSION = "trec_eval-10/1"


def _precision(kernel: Kernel, k: int | None) -> FloatArray:
    return kernel.at(kernel.cum_relevant, k) / float(k or 1)


def _recall(kernel: Kernel, k: int | None) -> FloatArray:
    return safe_div(kernel.at(kernel.cum_relevant, k), kernel.n_rel)


def _hit(kernel: Kernel, k: int | None) -> FloatArray:
    return (kernel.at(kernel.cum_relevant, k) > 0).astype(np.float64)


def _reciprocal_rank(kernel: Kernel, k: int | None) -> FloatArray:
    rr = np.zeros(kernel.n, dtype=np.float64)
    if kernel.depth:
        first = np.argmax(kernel.relevant, axis=1)
        found = kernel.relevant[np.arange(kernel.n), first]
        if k is not None:
            found &= first < k
        rr[found] = 1.0 / (first[found] + 1.0)
    return rr


def _average_precision(kernel: Kernel, k: int | None) -> FloatArray:
    return safe_div(kernel.at(kernel.cum_precision, k), kernel.n_rel)


def _ndcg(kernel: Kernel, k: int | None) -> FloatArray:
    return safe_div(kernel.at(kernel.cum_dcg, k), kernel.at(kernel.cum_idcg, k))


def _r_precision(kernel: Kernel, k: int | None) -> FloatArray:
    out = np.zeros(kernel.n, dtype=np.float64)
    n_rel = kernel.n_rel
    if kernel.depth:
        # Fewer retrieved than relevant: the missing ranks count as non-relevant, so the count
        # at the last retrieved rank is the count at rank R.
        col = np.minimum(n_rel, kernel.depth) - 1
        has = col >= 0
        rows = np.flatnonzero(has)
        out[has] = kernel.cum_relevant[rows, col[has]] / n_rel[has]
    return out


FAMILIES: tuple[MetricFamily, ...] = (
    MetricFamily(
        name="P",
        title="precision at k",
        needs_k=True,
        trec_name="P_{k}",
        aliases=("p", "precision"),
        compute=_precision,
        version=VERSION,
        description="""\
    P@k = (sum_{i<=k} rel_i) / k

Divides by k even when fewer than k documents were retrieved (a 3-document ranking with 3
relevant has P@10 = 0.3). Empty ranking: 0.""",
    ),
    MetricFamily(
        name="R",
        title="recall at k",
        trec_name="recall_{k}",
        trec_name_full="set_recall",
        aliases=("r", "recall"),
        compute=_recall,
        version=VERSION,
        description="""\
    R@k = (sum_{i<=k} rel_i) / R

`R` without a cutoff is recall over everything retrieved (`set_recall`). R = 0: 0.""",
    ),
    MetricFamily(
        name="MRR",
        title="reciprocal rank within k",
        trec_name="recip_rank on the ranking cut at k",
        trec_name_full="recip_rank",
        aliases=("mrr", "rr", "recip_rank"),
        compute=_reciprocal_rank,
        version=VERSION,
        description="""\
    MRR@k = 1 / (rank of the first relevant document)   if that rank <= k, else 0

trec_eval's `recip_rank` has no cutoff; `MRR` (no k) is exactly `recip_rank`, and `MRR@k` equals
`recip_rank` computed on the ranking cut at k. The mean over queries is the mean reciprocal rank.
No relevant document retrieved: 0.""",
    ),
    MetricFamily(
        name="nDCG",
        title="normalised discounted cumulative gain",
        trec_name="ndcg_cut_{k}",
        trec_name_full="ndcg",
        aliases=("ndcg", "ndcg_cut"),
        compute=_ndcg,
        version=VERSION,
        description="""\
    DCG@k  = sum_{i<=k} gain(g_i) / log2(i + 1)
    IDCG@k = the same sum over the ideal ranking: every judged grade > 0 of the query, sorted
             descending, retrieved or not
    nDCG@k = DCG@k / IDCG@k          (0 when IDCG@k = 0)

`gain` is linear by default, `gain(g) = g`, which is what trec_eval does (its gains are the
grades). With `gain: exponential` (`gain="exponential"` in the API), `gain(g) = 2**g - 1`
(Burges et al.), for both DCG and IDCG; relevance-1 documents have the same gain either way.
`nDCG` without a cutoff is trec_eval's `ndcg`: DCG over the whole ranking, IDCG over all judged
documents. Grades 0 and negative add nothing, and documents past rank k add nothing.

trec_eval note: the discount is `log2(rank + 1)` for every rank (rank 1 undiscounted). Older
trec_eval releases' `ndcg_cut` left ranks 1 and 2 both undiscounted (`log2(rank)` from rank 2);
trec_eval 9.0.5+ (and pytrec_eval) use `log2(rank + 1)`, and so does this plugin.""",
    ),
    MetricFamily(
        name="MAP",
        title="average precision truncated at k",
        trec_name="map_cut_{k}",
        trec_name_full="map",
        aliases=("map", "ap"),
        compute=_average_precision,
        version=VERSION,
        description="""\
    AP@k = ( sum_{i<=k, rel_i = 1} (sum_{j<=i} rel_j) / i ) / R

Normalised by **all** relevant documents R, not by min(k, R): a query with 20 relevant documents
can reach at most 10/20 = 0.5 at k = 10. `MAP` without a cutoff is trec_eval's `map` (AP over
the whole ranking). The mean over queries is the MAP. R = 0: 0.""",
    ),
    MetricFamily(
        name="Hit",
        title="success at k",
        needs_k=True,
        trec_name="success_{k}",
        aliases=("hit", "hits", "success", "hit_rate"),
        compute=_hit,
        version=VERSION,
        description="""\
    Hit@k = 1 if sum_{i<=k} rel_i > 0 else 0

The mean over queries is the hit rate. Empty ranking: 0.""",
    ),
    MetricFamily(
        name="R-Prec",
        title="R-precision",
        takes_k=False,
        trec_name="Rprec",
        aliases=("r-prec", "rprec", "r-precision"),
        compute=_r_precision,
        version=VERSION,
        description="""\
    R-Prec = (sum_{i<=R} rel_i) / R

Precision at rank R, the point where precision equals recall. When fewer than R documents were
retrieved, the missing ranks count as non-relevant. R = 0: 0.""",
    ),
)

# The families the JSON report stores per query at every cutoff, in its order; a report
# convention, so a newly registered family does not change existing reports.
_CUTOFF_ORDER: tuple[str, ...] = ("P", "R", "MRR", "nDCG", "MAP", "Hit")


def cutoff_metrics(ks: Sequence[int]) -> list[Metric]:
    """Every report family at every cutoff in ``ks``, then ``R-Prec``.

    Family-major order: ``P@k1, P@k2, R@k1, R@k2, MRR@..., nDCG@..., MAP@..., Hit@..., R-Prec``;
    duplicate cutoffs are dropped, the given order of ``ks`` is kept.
    """
    unique = list(dict.fromkeys(ks))
    metrics = [Metric(family, k) for family in _CUTOFF_ORDER for k in unique]
    metrics.append(Metric("R-Prec"))
    return metrics
