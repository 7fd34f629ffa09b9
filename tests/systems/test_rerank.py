"""The rerank stage (SPEC section 10): the top ``rerank_depth`` hits re-scored by a
``module:function`` or a CrossEncoder, the rest kept in order below, timed in the latency and
named in the identity. The CrossEncoder is a tiny BERT the test builds (random weights, a
seven-word vocabulary): no hub access."""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.config import Settings, parse_settings
from retrieval_gate.corpus import Corpus, Document
from retrieval_gate.errors import ConfigError, RunError
from retrieval_gate.metrics import rank_scored
from retrieval_gate.systems import Retrieved, RunOptions, stages
from retrieval_gate.systems.config import StageConfig, SystemConfig
from retrieval_gate.systems.rerank import RerankStage

TEXTS = {"a": "red apple", "b": "green apple pie", "c": "red red wine", "d": "blue sky"}
TEXTS["e"] = "red apple red"
CORPUS = Corpus(
    source=Path("docs.jsonl"), documents=tuple(Document(id=k, text=v) for k, v in TEXTS.items())
)
# What the wrapped system returns for every query, best first.
HITS = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.5}


def count_words(query: str, docs: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
    """Test reranker: how often the query's words occur in the document."""
    words = query.split()
    return [(doc, float(sum(text.split().count(w) for w in words))) for doc, text in docs]


def slow_count_words(query: str, docs: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
    time.sleep(0.02)
    return count_words(query, docs)


def stranger(query: str, docs: Sequence[tuple[str, str]]) -> list[tuple[str, float]]:
    return [("zz", 1.0)]


def forgetful(query: str, docs: Sequence[tuple[str, str]]) -> dict[str, float]:
    return {docs[0][0]: 1.0}


class Fixed:
    """The wrapped system: the same hits for every query, 1 ms each."""

    measures_latency = True

    def __init__(self) -> None:
        self.config = SystemConfig(name="fixed", kind="retriever", options={"retriever": "m:f"})
        self.asked: list[int] = []

    def retrieve(
        self,
        queries: Sequence[tuple[str, str]],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        self.asked.append(depth)
        return [Retrieved(dict(HITS), 1.0) for _ in queries]

    def identity(self) -> Mapping[str, Any]:
        return {"retriever": "m:f"}

    @property
    def stats(self) -> Mapping[str, Any]:
        return {}

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return {}

    def close(self) -> None:
        pass


def _settings(root: Path) -> Settings:
    return parse_settings({}, root / "pyproject.toml")


def _stage(tmp_path: Path, reranker: str, depth: int = 3) -> tuple[RerankStage, Fixed]:
    inner = Fixed()
    options = {"reranker": reranker, "rerank_depth": depth, "batch_size": 32}
    context = _settings(tmp_path).context(RunOptions(cache_dir=tmp_path), corpus=CORPUS)
    return RerankStage(inner, StageConfig("rerank", options), context), inner


def _ranking(result: Retrieved) -> list[tuple[str, float]]:
    return [(doc, result.hits[doc]) for doc in rank_scored(result.hits)]


def test_function_reranks_the_top_and_keeps_the_rest_below(tmp_path: Path) -> None:
    stage, inner = _stage(tmp_path, "tests.systems.test_rerank:count_words", depth=3)
    [result] = stage.retrieve([("q1", "red")], 2)
    # Top 3 (a, b, c) re-scored by counts of "red": a 1, b 0, c 2. d and e keep their order
    # below, at min 0 - 1 - i; e would count 2 but is below the depth.
    assert _ranking(result) == [("c", 2.0), ("a", 1.0), ("b", 0.0), ("d", -1.0), ("e", -2.0)]
    # Asked for max(depth 2, rerank_depth 3).
    assert inner.asked == [3]


def test_reranker_time_is_in_the_latency(tmp_path: Path) -> None:
    stage, _ = _stage(tmp_path, "tests.systems.test_rerank:slow_count_words")
    [result] = stage.retrieve([("q1", "red")], 5)
    # The wrapped system's 1 ms plus the reranker's sleep of at least 20 ms.
    assert result.latency_ms >= 1.0 + 20.0


def test_identity_names_the_reranker(tmp_path: Path) -> None:
    stage, _ = _stage(tmp_path, "tests.systems.test_rerank:count_words")
    assert stage.identity() == {
        "retriever": "m:f",
        "stages": [
            {
                "stage": "rerank",
                "reranker": "tests.systems.test_rerank:count_words",
                "rerank_depth": 3,
                "batch_size": 32,
                "reranker_identity": "tests.systems.test_rerank:count_words",
            }
        ],
    }


def test_a_reranker_answering_wrong_is_a_run_error(tmp_path: Path) -> None:
    stage, _ = _stage(tmp_path, "tests.systems.test_rerank:stranger")
    with pytest.raises(RunError) as info:
        stage.retrieve([("q1", "red")], 5)
    assert str(info.value) == (
        "[query q1]: reranker tests.systems.test_rerank:stranger returned 'zz', which was not "
        "among the 3 candidates it was given; a reranker re-scores its candidates, it does not "
        "add documents"
    )
    stage, _ = _stage(tmp_path, "tests.systems.test_rerank:forgetful")
    with pytest.raises(RunError, match="returned no score for 'b'"):
        stage.retrieve([("q1", "red")], 5)


def test_an_unimportable_reranker_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _stage(tmp_path, "tests.systems.test_rerank:absent")
    assert str(info.value).startswith(
        "[system.fixed]: cannot import reranker 'tests.systems.test_rerank:absent': AttributeError"
    )


def test_the_stage_is_configured_like_any_stage() -> None:
    assert "rerank" in stages()
    spec = {"retriever": "m:f", "stages": [{"stage": "rerank", "reranker": "m:g"}]}
    found = parse_settings({"system": {"s": spec}}, Path("/p/pyproject.toml")).system("s")
    assert found.stages == (
        StageConfig("rerank", {"reranker": "m:g", "rerank_depth": 20, "batch_size": 32}),
    )
    with pytest.raises(ConfigError) as info:
        bad = {"retriever": "m:f", "stages": [{"stage": "rerank", "rerank_depth": 0}]}
        parse_settings({"system": {"s": bad}}, Path("/p/pyproject.toml"))
    assert (
        str(info.value)
        == "/p/pyproject.toml [system.s.stages[0]]: invalid 'rerank_depth': 0; expected integer (>= 1)"
    )


def _tiny_cross_encoder(folder: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder.mkdir()
    words = ["red", "green", "apple", "pie", "wine", "blue", "sky"]
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: i for i, token in enumerate([*special, *words])}
    if "vocab" in inspect.signature(transformers.BertTokenizer.__init__).parameters:
        tokenizer = transformers.BertTokenizer(vocab=vocab)  # transformers 5
    else:
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
        tokenizer = transformers.BertTokenizer(vocab_file=str(folder / "vocab.txt"))
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(special) + len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=16,
        max_position_embeddings=32,
        num_labels=1,
        # Wide random weights, so the scores of different pairs are far apart.
        initializer_range=0.3,
    )
    transformers.BertForSequenceClassification(config).save_pretrained(folder)


def test_a_local_cross_encoder_reranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _tiny_cross_encoder(tmp_path / "ce")
    stage, _ = _stage(tmp_path, str(tmp_path / "ce"), depth=4)
    [result] = stage.retrieve([("q1", "red apple")], 5)
    # The same model scoring the same pairs directly: the top 4 ranked by it, e below.
    model = st.CrossEncoder(str(tmp_path / "ce"), device="cpu", local_files_only=True)
    direct = model.predict([("red apple", TEXTS[d]) for d in "abcd"], show_progress_bar=False)
    expected = dict(zip("abcd", (float(s) for s in direct), strict=True))
    assert len(set(expected.values())) == 4
    ranked = _ranking(result)
    assert [doc for doc, _ in ranked] == [*rank_scored(expected), "e"]
    assert {doc: score for doc, score in ranked[:4]} == pytest.approx(expected, abs=1e-6)
    assert ranked[4][1] == pytest.approx(min(expected.values()) - 1.0, abs=1e-6)
    identity = stage.identity()["stages"][0]["reranker_identity"]
    assert identity.startswith("cross-encoder:ce:")
