"""Extraction metrics: precision, recall and F1 of predicted term sets (docs/extraction.md).

Computed from :class:`SetInputs`, one entry per document: the gold terms a reader should find
(affirmed), the gold terms annotated with another assertion status (negated: not expected), and
the terms the system predicted as present and as negated. Each family's per-document value is
that document's own figure; the families differ in how documents are combined:

* ``*_micro``: counts summed over documents first (aggregation over the ``TP``, ``FP``, ``FN``
  component series), so a long document weighs by its number of terms;
* ``*_macro``: the per-document values averaged, each document weighing 1;
* ``*_weighted``: the per-document values averaged with weight ``max(n_gold, 1)``.

Edge cases follow Phentrieve's extraction benchmark (``phentrieve/evaluation/
extraction_metrics.py``): a ratio whose denominator is 0 is 0 (no prediction: P = 0; no gold:
R = 0; P + R = 0: F1 = 0), so a document with neither gold nor predicted terms scores 0 on every
ratio, and the weighted average gives such a document weight 1, not 0.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.registry import Aggregation, MetricFamily, mean

__all__ = ["FAMILIES", "SetInputs", "counts"]

FloatArray = npt.NDArray[np.float64]

ORDER = 80  # after the ranking families, before latency

VERSION = "phentrieve-spec11/1"


@dataclass(frozen=True)
class SetInputs:
    """Per document: affirmed gold terms, gold terms not affirmed (negated), the terms the
    system predicted present, and the terms it reported negated."""

    gold: Sequence[frozenset[str]]
    gold_negated: Sequence[frozenset[str]]
    predicted: Sequence[frozenset[str]]
    predicted_negated: Sequence[frozenset[str]]


def counts(inputs: SetInputs) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per-document TP, FP, FN (as float arrays).

    A term the system reports negated is not a claim that the term is present: it is never a
    true or a false positive (and an affirmed gold term reported only negated is missed, a false
    negative). A term given as both present and negated counts as negated. A term predicted
    present that the gold annotates as not affirmed is a false positive, like any other term
    outside the affirmed gold.
    """
    tp, fp, fn = [], [], []
    for gold, predicted, negated in zip(
        inputs.gold, inputs.predicted, inputs.predicted_negated, strict=True
    ):
        present = predicted - negated
        hits = len(present & gold)
        tp.append(hits)
        fp.append(len(present) - hits)
        fn.append(len(gold) - hits)
    as_array = np.asarray
    return (
        as_array(tp, dtype=np.float64),
        as_array(fp, dtype=np.float64),
        as_array(fn, dtype=np.float64),
    )


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    out = np.zeros_like(num)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _precision(inputs: SetInputs, k: int | None) -> FloatArray:
    tp, fp, _ = counts(inputs)
    return _ratio(tp, tp + fp)


def _recall(inputs: SetInputs, k: int | None) -> FloatArray:
    tp, _, fn = counts(inputs)
    return _ratio(tp, tp + fn)


def _f1(inputs: SetInputs, k: int | None) -> FloatArray:
    # 2PR / (P + R) equals 2TP / (2TP + FP + FN) whenever TP > 0, and both are 0 otherwise.
    tp, fp, fn = counts(inputs)
    return _ratio(2 * tp, 2 * tp + fp + fn)


def _count(index: int) -> Callable[[SetInputs, int | None], FloatArray]:
    def compute(inputs: SetInputs, k: int | None) -> FloatArray:
        return counts(inputs)[index]

    return compute


def _n_gold(inputs: SetInputs, k: int | None) -> FloatArray:
    return np.asarray([len(gold) for gold in inputs.gold], dtype=np.float64)


def _sum(values: FloatArray) -> float:
    return float(values.sum())


def _safe(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _micro_p(values: FloatArray, tp: FloatArray, fp: FloatArray, fn: FloatArray) -> float:
    return _safe(float(tp.sum()), float(tp.sum() + fp.sum()))


def _micro_r(values: FloatArray, tp: FloatArray, fp: FloatArray, fn: FloatArray) -> float:
    return _safe(float(tp.sum()), float(tp.sum() + fn.sum()))


def _micro_f1(values: FloatArray, tp: FloatArray, fp: FloatArray, fn: FloatArray) -> float:
    return _safe(float(2 * tp.sum()), float(2 * tp.sum() + fp.sum() + fn.sum()))


def _weighted(values: FloatArray, n_gold: FloatArray) -> float:
    if not values.size:
        return 0.0
    weights = np.maximum(n_gold, 1.0)
    return float((values * weights).sum() / weights.sum())


_SUM = Aggregation("sum", _sum)
_COUNTS = ("TP", "FP", "FN")
_WEIGHTED = Aggregation("mean weighted by max(n_gold, 1)", _weighted, ("n_gold",))

_SETS = (
    "Extraction suites only (`kind: extraction`). Per document, gold = the affirmed gold terms "
    "(after alt and obsolete ids were mapped to current terms); gold terms with another "
    "assertion status are not expected. predicted = the terms the system predicted present; a "
    "term it reports negated is neither a true nor a false positive (so an affirmed gold term "
    "reported only negated is a false negative), and a term given both ways counts as negated. "
    "TP = |predicted & gold|, FP = |predicted - gold| (a not-affirmed gold term predicted "
    "present is a false positive), FN = |gold - predicted|. Not in trec_eval."
)
_EDGES = (
    "A ratio whose denominator is 0 is 0 (Phentrieve's convention): no predicted term gives "
    "P = 0, no gold term R = 0, P + R = 0 F1 = 0, so a document with neither gold nor predicted "
    "terms scores 0. No documents: 0."
)


def _text(*parts: str) -> str:
    return "\n\n".join(textwrap.fill(part, width=96) for part in parts)


def _count_family(
    name: str, title: str, compute: Callable[..., FloatArray], what: str
) -> MetricFamily:
    return MetricFamily(
        name=name,
        title=title,
        input="sets",
        takes_k=False,
        compute=compute,
        bounds=(0.0, None),
        higher_is_better=name in ("TP", "n_gold"),
        aggregation=_SUM,
        version=VERSION,
        description=_text(f"{what} Summed over documents.", _SETS),
    )


_FORMULAS: dict[str, tuple[str, Callable[[SetInputs, int | None], FloatArray], str]] = {
    "P": ("precision", _precision, "TP / (TP + FP)"),
    "R": ("recall", _recall, "TP / (TP + FN)"),
    "F1": ("F1", _f1, "2 P R / (P + R) = 2 TP / (2 TP + FP + FN)"),
}
_MICRO = {"P": _micro_p, "R": _micro_r, "F1": _micro_f1}


def _ratio_family(short: str, scheme: str) -> MetricFamily:
    word, compute, formula = _FORMULAS[short]
    if scheme == "micro":
        aggregation = Aggregation(f"micro ({', '.join(_COUNTS)} summed)", _MICRO[short], _COUNTS)
        first = (
            f"{short}_micro = {formula}, with TP, FP and FN each summed over the documents "
            f"first. A document's own value (per-document expect) is its {word} from its own "
            "counts."
        )
        title = f"micro-averaged {word}"
    elif scheme == "macro":
        aggregation = mean
        first = f"{short}_macro = mean over documents of the document's {formula}."
        title = f"macro-averaged {word}"
    else:
        aggregation = _WEIGHTED
        first = (
            f"{short}_weighted = sum_d w_d {short}_d / sum_d w_d, where {short}_d = {formula} of "
            "document d and w_d = max(n_gold_d, 1), its number of affirmed gold terms (at least "
            "1, as Phentrieve weighs, so a document without gold terms still counts)."
        )
        title = f"gold-weighted {word}"
    return MetricFamily(
        name=f"{short}_{scheme}",
        title=title,
        input="sets",
        takes_k=False,
        compute=compute,
        aggregation=aggregation,
        version=VERSION,
        description=_text(first, _SETS, _EDGES),
    )


FAMILIES: tuple[MetricFamily, ...] = (
    *(
        _ratio_family(short, scheme)
        for scheme in ("micro", "macro", "weighted")
        for short in ("P", "R", "F1")
    ),
    _count_family("TP", "true positives", _count(0), "TP: predicted terms in the gold set."),
    _count_family("FP", "false positives", _count(1), "FP: predicted terms outside the gold set."),
    _count_family("FN", "false negatives", _count(2), "FN: gold terms not predicted."),
    _count_family("n_gold", "gold terms", _n_gold, "n_gold: the affirmed gold terms."),
)
