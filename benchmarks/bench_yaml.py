"""Reading a suite in YAML: libyaml (what ``files.structured.load_yaml`` uses where PyYAML has it)
against PyYAML's pure-Python parser (what it used before), both with the duplicate-key check,
on suites of 50 to 10,000 queries shaped like a team's (id, query text, relevant ids, a graded
judgement). The two loaders alternate within each round; the medians of ``--repeat`` rounds are
reported with their ratio. Before timing, each size is checked to load to the same value both
ways.

    python benchmarks/bench_yaml.py [--sizes 50 1000 10000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import yaml

from retrieval_gate.files.structured import _strict_loaders


def suite_text(queries: int) -> str:
    lines = ["name: answers", "k: [1, 5, 10]", "gates: {P@5: 0.5, nDCG@10: 0.4}", "queries:"]
    for i in range(queries):
        lines += [
            f"  - id: q{i}",
            f'    query: "how do I configure feature {i} when the service runs behind a proxy?"',
            f"    relevant: [doc-{i}, doc-{i + 1}, doc-{i * 7 % 1000}]",
            f"    graded: {{doc-{i}: 2, doc-{i + 1}: 1}}",
        ]
    return "\n".join(lines) + "\n"


def seconds(loader: type, text: str) -> float:
    start = time.perf_counter()
    yaml.load(text, Loader=loader)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    fast, pure = _strict_loaders()
    if fast is pure:
        raise SystemExit("this PyYAML has no libyaml: nothing to compare")
    print("| queries | KiB | pure-Python s | libyaml s | libyaml / pure |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        text = suite_text(size)
        if yaml.load(text, Loader=fast) != yaml.load(text, Loader=pure):
            raise SystemExit(f"{size} queries: the loaders disagree")
        times: dict[str, list[float]] = {"pure": [], "fast": []}
        for round_ in range(args.repeat):
            order = [("pure", pure), ("fast", fast)]
            for name, loader in order if round_ % 2 == 0 else order[::-1]:
                times[name].append(seconds(loader, text))
        p, f = statistics.median(times["pure"]), statistics.median(times["fast"])
        print(f"| {size:,} | {len(text) / 1024:,.0f} | {p:.4f} | {f:.4f} | {f / p:.2f} |")


if __name__ == "__main__":
    main()
