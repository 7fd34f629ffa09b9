"""ERR@k: expected reciprocal rank for graded relevance (Chapelle, Metzler, Zhang, Grinspan 2009).

A cascade user reads the ranking top down and stops at rank ``r`` with probability ``R_r``,
the satisfaction probability of that document's grade:

    R_i   = (2**g_i - 1) / 2**g_max
    ERR@k = sum_{r=1..k} (1 / r) * R_r * prod_{i<r} (1 - R_i)

Which ``g_max``. ranx (checked through 0.3.21) has no ERR measure, so there is nothing of it to
follow; Elasticsearch's ``rank_eval`` ``expected_reciprocal_rank`` takes ``g_max`` as its
mandatory ``maximum_relevance`` parameter, "the highest relevance grade used in the
user-supplied relevance judgments", and gdeval (what ir_measures wraps) fixes it at 4. Here
``g_max`` is exactly Elasticsearch's definition filled in from the data: the highest grade judged
in the qrels being evaluated (all queries of the suite, or all of ``evaluate()``'s ``qrels``),
so a suite graded 0..3 gets Elasticsearch's ``maximum_relevance: 3``. Consequence: adding a
query with a higher grade to a suite changes every query's ERR (the family's version then says
nothing; the suite digest in the baseline fingerprint does).

Edge cases: unjudged documents, grade 0 and negative grades have ``R = 0`` (Elasticsearch skips
an unrated hit while still counting its rank, which is the same); a query with nothing relevant,
or judgments without any grade > 0, scores 0; an empty ranking scores 0; ranks beyond the ranking
add nothing; ``ERR`` without a cutoff covers the whole ranking. Ties are ordered like every
other metric (score descending, document id descending). Values lie in [0, 1 - 2**-g_max].
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.kernel import Kernel
from retrieval_gate.metrics.registry import MetricFamily

__all__ = ["FAMILIES"]

FloatArray = npt.NDArray[np.float64]


def _cum_err(kernel: Kernel) -> FloatArray:
    ideal = kernel.judged.ideal
    g_max = float(ideal.max()) if ideal.size else 0.0
    if g_max <= 0.0:
        return np.zeros((kernel.n, kernel.depth), dtype=np.float64)
    # (2**g - 1) / 2**g_max, written so that no term overflows (2**g is inf past g = 1023, and
    # inf / inf nan): the same bits while g + g_max < 53, as every power of two is exact.
    stop = np.exp2(kernel.grades - g_max) - np.exp2(-g_max)
    # prod_{i<r} (1 - R_i): the probability that the user is still reading at rank r.
    reach = np.ones_like(stop)
    if kernel.depth > 1:
        reach[:, 1:] = np.cumprod(1.0 - stop[:, :-1], axis=1)
    ranks = np.arange(1, kernel.depth + 1, dtype=np.float64)
    return np.cumsum(stop * reach / ranks, axis=1)


def _err(kernel: Kernel, k: int | None) -> FloatArray:
    return kernel.at(kernel.memo("err_cum", lambda: _cum_err(kernel)), k)


FAMILIES: tuple[MetricFamily, ...] = (
    MetricFamily(
        name="ERR",
        title="expected reciprocal rank",
        aliases=("err", "expected_reciprocal_rank"),
        compute=_err,
        trec_name=None,
        version="chapelle2009-es/1",
        description="""\
    R_i   = (2**g_i - 1) / 2**g_max
    ERR@k = sum_{r<=k} (1 / r) * R_r * prod_{i<r} (1 - R_i)

Expected reciprocal rank (Chapelle et al. 2009), as Elasticsearch's `rank_eval`
`expected_reciprocal_rank` defines it, with its `maximum_relevance` g_max set to the highest
grade judged in the evaluated qrels (all queries of the suite). ranx has no ERR. Unjudged,
grade-0 and negatively graded documents have R = 0; no grade > 0 in the qrels, or an empty
ranking: 0. `ERR` without a cutoff covers the whole ranking. Not in trec_eval 10.""",
    ),
)
