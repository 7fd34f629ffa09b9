"""A project whose cold run fills every kind of cache entry a run reads back, and the checks that
a cache folder holds only sound entries (tests/integration/test_concurrent_cache.py).

The project: 160 documents in the tiny model's words (tests/conftest.py), six queries, and two
systems over the same vectors, embedded chroma (its collection, build id, search results and
stability figures) and exact. Cold, it embeds every document (an embedding shard), builds the
collection one vector per insert (about a second: the window a kill lands in), measures the
index's stability and caches its searches.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

WORDS = [
    "red",
    "apple",
    "pie",
    "green",
    "wine",
    "blue",
    "sky",
    "recipe",
    "password",
    "login",
    "capital",
    "france",
    "paris",
    "invoices",
    "customers",
    "month",
    "charge",
    "account",
    "refund",
    "money",
    "card",
    "business",
    "days",
    "database",
    "night",
    "snapshots",
    "engineer",
    "alerting",
    "system",
    "website",
    "employees",
    "vacation",
    "holidays",
    "laptop",
    "mentor",
    "week",
    "company",
]

QUERIES = {
    "fruit": "red apple pie",
    "drink": "green wine",
    "login": "reset my password",
    "money": "refund money to the card",
    "ops": "database snapshots every night",
    "staff": "new employees meet their mentor",
}

SUITE = """
name: words
k: [1, 3, 10]
gates:
  Hit@10: 0.0
queries:
"""


def documents() -> dict[str, str]:
    """160 documents of 4 to 12 of the words, the same every time."""
    rng = random.Random(30)
    return {
        f"d{i:03d}.md": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
        for i in range(160)
    }


def write_project(root: Path, model: Path) -> None:
    corpus = root / "corpus"
    corpus.mkdir(exist_ok=True)
    docs = documents()
    for name, text in docs.items():
        (corpus / name).write_text(text + "\n")
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [tool.pytest.ini_options]
            addopts = "-p no:cacheprovider"

            [tool.retrieval_gate]
            corpus = "corpus"
            systems = ["tiny-chroma", "tiny-exact"]

            [tool.retrieval_gate.system.tiny-chroma]
            embedder = "sentence-transformers"
            model = "{model.as_posix()}"
            index = "chroma"
            index_stability = "on"

            [tool.retrieval_gate.system.tiny-exact]
            embedder = "sentence-transformers"
            model = "{model.as_posix()}"
            index = "exact"
            """
        )
    )
    names = sorted(docs)
    lines = [textwrap.dedent(SUITE).rstrip("\n")]
    for i, (qid, text) in enumerate(QUERIES.items()):
        relevant = ", ".join(names[i * 7 : i * 7 + 3])
        lines += [f"  - id: {qid}", f"    query: {text}", f"    relevant: [{relevant}]"]
    (root / "words.retrieval.yaml").write_text("\n".join(lines) + "\n")


def gate_command(cache: Path, report: Path, *extra: str) -> list[str]:
    """A user's ``pytest --retrieval-gate`` session as its own process."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "--retrieval-gate",
        f"--rg-cache-dir={cache}",
        f"--rg-report={report}",
        *extra,
    ]


def start(root: Path, cache: Path, report: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        gate_command(cache, report, *extra),
        cwd=root,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run_here(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    cache: Path,
    report: Path,
    *extra: str,
) -> str:
    """The session `start` starts, run in this process instead (pytester's in-process run, in
    the project's folder), for a session that races no other and that nothing kills: a process
    of its own would prove nothing more, at a second import of sentence-transformers (about
    6 s of CPU). Its output; fails the test unless every item passed."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(root)
    result = pytester.runpytest(*gate_command(cache, report, *extra)[3:])
    if result.ret != 0:
        pytest.fail(f"gate session ended with {result.ret}:\n{result.stdout.str()[-4000:]}")
    return result.stdout.str()


def finish(process: subprocess.Popen[str], *, timeout: float = 300) -> str:
    """The session's output once it ended; fails the test unless every item passed."""
    out, _ = process.communicate(timeout=timeout)
    if process.returncode != 0:
        pytest.fail(f"gate session ended with {process.returncode}:\n{out[-4000:]}")
    return out


def outcome(report: Path) -> dict[str, Any]:
    """Every run's rankings and metrics, from the JSON twin of ``report``."""
    data = json.loads(report.with_suffix(".json").read_text())
    return {
        f"{run['suite']} x {run['system']}": {
            "rankings": {q["id"]: q["ranking"] for q in run["queries"]},
            "metrics": run["metrics"],
        }
        for run in data["runs"]
    }


def sound_entries(cache: Path) -> list[str]:
    """What the cache folder holds, every entry checked as a run would check it: each embedding
    shard readable and written for its folder's identity, each sealed entry (search results,
    stability figures, chroma build records) whole and matching its digest and key. Fails naming the first unsound entry. Temporary
    files of killed writers may remain: no run reads them."""
    from retrieval_gate.embed.cache import _load_shard
    from retrieval_gate.files.sealed import SealBroken, unseal

    seen: list[str] = []
    for path in sorted(cache.rglob("*")):
        name = path.relative_to(cache).as_posix()
        if path.is_dir() or path.name.startswith(".tmp-") or path.name.endswith(".tmp"):
            continue
        if path.name.startswith("shard-") and path.suffix == ".npz":
            identity = (path.parent / "identity.txt").read_text().rstrip("\n")
            owner = hashlib.sha256(identity.encode()).hexdigest()
            try:
                _load_shard(path, owner)
            except Exception as exc:
                pytest.fail(f"{name} is not a sound embedding shard: {exc}")
        elif path.parent.parent.name == "index-results" and path.suffix == ".json":
            identity = (path.parent / "identity.txt").read_text().rstrip("\n")
            _unsealed(path, f"{identity}\n{path.name}", name, unseal, SealBroken)
        elif path.parent.name == "index-stability":
            _unsealed(path, path.stem, name, unseal, SealBroken)
        elif path.name.startswith(".retrieval-gate-build-"):
            collection = path.name.removeprefix(".retrieval-gate-build-")
            _unsealed(path, collection, name, unseal, SealBroken)
        seen.append(name)
    return seen


def _unsealed(path: Path, key: str, name: str, unseal: Any, broken: type[Exception]) -> None:
    try:
        unseal(path.read_text(), key)
    except broken as exc:
        pytest.fail(f"{name} is not a sound sealed entry: {exc}")
