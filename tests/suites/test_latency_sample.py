"""The runners rank in batches and time latency on a sample (SPEC section 5).

A system that ranks in batches gets the same rankings, scores and extracted terms as through
its one-query-at-a-time path; its latency is timed on ``latency_sample`` queries (every one of
a small suite), the others have none; the report says how many were timed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_gate.config import Settings, parse_settings
from retrieval_gate.corpus import Corpus, Document
from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder
from retrieval_gate.errors import ConfigError
from retrieval_gate.runs import latency_sample, run_suite
from retrieval_gate.runs.evaluate import evaluate_run, record_run
from retrieval_gate.suites.suite import Suite, parse_suite
from retrieval_gate.systems import RunOptions
from retrieval_gate.systems.embedding import EmbeddingSystem
from retrieval_gate.systems.timings import AUTO_LATENCY_SAMPLE, latency_notes, latency_positions

WORDS = ["apple", "pie", "wine", "sky", "blue", "red", "green", "tea"]
# The tiny ontology's words (tests/data/ontology/tiny.obo), for the extraction suite.
TERMS = ["arm", "leg", "skull", "short", "long", "small", "limb", "head", "bone", "abnormality"]
DIM = len(WORDS) + len(TERMS)


class _Bag:
    """Each known word a fixed direction; a text the sum of its words (so texts with the same
    words tie, whatever their order), any other word a little of every direction."""

    identity = "test-bag/1"
    dim = DIM

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        rows = np.zeros((len(texts), DIM), dtype=np.float32)
        known = [*WORDS, *TERMS]
        for i, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                if word in known:
                    rows[i, known.index(word)] += 1.0
                else:
                    rows[i] += 0.1
        return rows

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_documents(texts)


@pytest.fixture(autouse=True)
def bag_embedder() -> Iterator[None]:
    register_embedder(
        EmbedderBackend(
            name="test-bag",
            extra="test",
            options={},
            load=lambda spec, cache_dir, entry: _Bag(),
            summary="test embedder",
        )
    )
    yield
    del EMBEDDERS["test-bag"]


CORPUS = Corpus(
    source=Path("c.jsonl"),
    documents=tuple(
        Document(id=f"d{i:02d}", text=f"{WORDS[i % 8]} {WORDS[(i * 3) % 8]}") for i in range(24)
    ),
)


def _settings(tmp_path: Path, **top: Any) -> Settings:
    table = {"embedder": "test-bag", "model": "m", "index": "exact"}
    return parse_settings({"system": {"bag": table}, **top}, tmp_path / "pyproject.toml")


def _suite(tmp_path: Path, n: int, gates: dict[str, float] | None = None) -> Suite:
    queries = [
        {"id": f"q{i:02d}", "query": f"{WORDS[i % 8]} {WORDS[(i + 1) % 8]}", "relevant": ["d01"]}
        for i in range(n)
    ]
    data: dict[str, Any] = {"name": "s", "k": [1, 5], "queries": queries}
    if gates:
        data["gates"] = gates
    return parse_suite(data, tmp_path / "s.retrieval.yaml")


def test_latency_positions_are_evenly_spaced_and_the_same_every_run() -> None:
    assert latency_positions(0, 10) == []
    assert latency_positions(3, 0) == []
    assert latency_positions(10, 4) == [0, 1, 2, 3]
    assert latency_positions(1, 9) == [0]
    # round(i * 11 / 4) for i in 0..4: 0, 2.75 -> 3, 5.5 -> 6 (to even), 8.25 -> 8, 11.
    assert latency_positions(5, 12) == [0, 3, 6, 8, 11]


def test_the_setting_reads_auto_or_a_number(tmp_path: Path) -> None:
    assert _settings(tmp_path).latency_sample is None
    assert _settings(tmp_path, latency_sample="auto").latency_sample is None
    assert _settings(tmp_path, latency_sample=7).latency_sample == 7
    for bad in (-1, 2.5, True, "all"):
        with pytest.raises(
            ConfigError,
            match=r"invalid 'latency_sample': .*; expected string or integer \(\"auto\" or a number",
        ):
            _settings(tmp_path, latency_sample=bad)


def test_auto_times_only_when_latency_counts(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert latency_sample(_suite(tmp_path, 3), settings) == 0
    gated = _suite(tmp_path, 3, {"latency_p95_ms": 1000})
    assert latency_sample(gated, settings) == AUTO_LATENCY_SAMPLE == 100
    assert latency_sample(_suite(tmp_path, 3), _settings(tmp_path, latency_sample=2)) == 2
    with pytest.raises(ConfigError, match="latency_sample = 0 times no query, but suite s gates"):
        latency_sample(gated, _settings(tmp_path, latency_sample=0))


def _run(tmp_path: Path, suite: Suite, settings: Settings, corpus: Corpus = CORPUS) -> Any:
    return run_suite(
        suite, settings.system("bag"), settings, RunOptions(cache_dir=tmp_path / "c"), corpus
    )


def test_a_sample_is_timed_and_the_rest_is_not(tmp_path: Path) -> None:
    suite = _suite(tmp_path, 12)
    sampled = _run(tmp_path, suite, _settings(tmp_path, latency_sample=5))
    timed = [i for i, ms in enumerate(sampled.latencies_ms) if not math.isnan(ms)]
    assert timed == [0, 3, 6, 8, 11]
    assert sampled.stats["latency_queries"] == 5
    record = record_run(evaluate_run(sampled), "s.retrieval.yaml")
    assert [q.latency_ms is not None for q in record.queries] == [i in timed for i in range(12)]
    assert record.stats.get("latency_measured", True) is True
    assert record.latency_ms["p50"] > 0.0
    assert "latency: timed on 5 of 12 queries" in latency_notes(record.stats, record.n)
    # Every query timed is said so plainly; one query in the singular; a kind's own unit.
    assert latency_notes({"latency_queries": 12}, 12) == ["latency: timed on every query (12)"]
    assert latency_notes({"latency_queries": 1}, 1) == ["latency: timed on the suite's one query"]
    assert latency_notes({"latency_queries": 1}, 3, "document", "documents") == [
        "latency: timed on 1 of 3 documents"
    ]
    # Timed or not, the rankings are the batched search's, the same as without any timing.
    untimed = _run(tmp_path, suite, _settings(tmp_path))
    assert untimed.stats["latency_queries"] == 0
    assert untimed.rankings == sampled.rankings and untimed.scores == sampled.scores
    record = record_run(evaluate_run(untimed), "s.retrieval.yaml")
    assert record.stats["latency_measured"] is False
    assert all(q.latency_ms is None for q in record.queries)
    assert latency_notes(record.stats, record.n)[0].startswith("latency: not timed")
    # Where the time went, stage by stage, metrics included.
    timings = record.stats["timings_ms"]
    assert list(timings) == ["load", "embed", "index", "search", "latency", "metrics"]
    assert timings["latency"] == 0.0 and timings["metrics"] > 0.0


def test_batched_and_one_by_one_runs_rank_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ties everywhere: 24 documents over 8 words, queries of two words.
    suite = _suite(tmp_path, 20)
    settings = _settings(tmp_path, latency_sample=3)
    batched = _run(tmp_path, suite, settings)
    monkeypatch.setattr(EmbeddingSystem, "batched", False)
    alone = _run(tmp_path, suite, settings)
    assert alone.stats["latency_queries"] == 20  # one call per query, each timed
    assert batched.rankings == alone.rankings
    assert batched.scores == alone.scores
    assert any(len(set(s)) < len(s) for s in batched.scores)  # tied, as promised


def test_extraction_batched_and_one_by_one_extract_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pronto")
    from retrieval_gate.ontology.load import load_ontology
    from retrieval_gate.suites.ontology import term_corpus

    tiny = Path(__file__).parents[1] / "data" / "ontology" / "tiny.obo"
    corpus = term_corpus(load_ontology(tiny, base=tmp_path, cache_dir=None), None)
    documents = [
        {
            "id": f"doc{i}",
            "text": f"{TERMS[i % 10]} arm. No {TERMS[(i * 3) % 10]} skull. Long {WORDS[i % 8]}.",
            "terms": [],
        }
        for i in range(30)
    ]
    suite = parse_suite(
        {"name": "x", "kind": "extraction", "ontology": str(tiny), "documents": documents},
        tmp_path / "x.yaml",
    )
    table = {
        "embedder": "test-bag",
        "model": "m",
        "index": "exact",
        "extraction": {"num_results": 3, "chunk_threshold": 0.3, "negation": "en"},
    }
    settings = parse_settings(
        {"system": {"bag": table}, "latency_sample": 4}, tmp_path / "pyproject.toml"
    )
    batched = _run(tmp_path, suite, settings, corpus)
    assert sum(not math.isnan(ms) for ms in batched.latencies_ms) == 4
    monkeypatch.setattr(EmbeddingSystem, "batched", False)
    alone = _run(tmp_path, suite, settings, corpus)
    assert (batched.rankings, batched.scores, batched.extras) == (
        alone.rankings,
        alone.scores,
        alone.extras,
    )
    assert any(batched.rankings) and any(batched.extras)
    assert batched.stats["chunks"] == alone.stats["chunks"] == 30 * 3
