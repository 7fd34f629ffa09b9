"""Judged@k: the share of the top k that carries a judgment, a health figure of the ground truth.

    Judged@k = |top min(k, L) ∩ assessed| / min(k, L)

with ``L`` the length of the query's ranking and ``assessed`` the documents judged with grade
>= 0 (relevant or judged non-relevant). A falling Judged@k says the system now returns documents
nobody has looked at: a drop in nDCG may then be stale labels rather than a worse ranking.

Which denominator. ir_measures' ``Judged`` documents itself as "P@k with a rel lower than any
judgment", which would divide by k, but its implementation (``JudgedProvider``, adapted from
OpenNIR) divides by ``min(k, L)``: a query that returns 3 documents, all judged, has Judged@10 = 1.
This family follows the implementation, so values agree with what ir_measures prints. Ties are
ordered like every other metric here (trec_eval: score descending, document id descending;
ir_measures orders ties by document id ascending, so values can differ where ties straddle k).

Edge cases: an empty ranking scores 0 (ir_measures divides by zero there); a query without any
judgment scores 0; a negative grade is trec_eval's "in the pool but not judged" and counts as
unjudged (ir_measures counts any qrels entry, negative grades included).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.kernel import Kernel, safe_div
from retrieval_gate.metrics.registry import MetricFamily

__all__ = ["FAMILIES"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _cum_assessed(kernel: Kernel) -> IntArray:
    assessed = kernel.judged.assessed
    if assessed is None:
        # The plugin's bug, not the user's: every builder that serves Judged@k records it.
        raise ValueError("Judged@k needs Judged.assessed; build the arrays with assessed ranks")
    return np.cumsum(assessed[:, : kernel.depth], axis=1, dtype=np.int64)


def _judged(kernel: Kernel, k: int | None) -> FloatArray:
    count = kernel.at(kernel.memo("assessed_cum", lambda: _cum_assessed(kernel)), k)
    shown = np.minimum(kernel.judged.lengths, k if k is not None else kernel.depth)
    return safe_div(count, shown)


FAMILIES: tuple[MetricFamily, ...] = (
    MetricFamily(
        name="Judged",
        title="share of the top k that is judged",
        aliases=("judged", "judged_rate"),
        needs_k=True,
        compute=_judged,
        trec_name=None,
        version="ir_measures-0.3/1",
        description="""\
    Judged@k = |top min(k, L) ∩ judged| / min(k, L)

The share of the first k results (of L retrieved) that have a judgment with grade >= 0, as
ir_measures' `Judged@k` computes it (denominator min(k, L), not k: 3 results, all judged, give
1). A health figure of the ground truth, not of the system: when it falls, the system returns
documents nobody judged, and a lower nDCG may be stale labels. An empty ranking or a query
without judgments: 0. A negative grade ("in the pool but not judged" to trec_eval) counts as
unjudged. Not in trec_eval 10.""",
    ),
)
