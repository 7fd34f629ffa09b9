"""An embedder and an index from outside the package: a project installs a distribution whose
``retrieval_gate.embedders`` and ``retrieval_gate.indexes`` entry points each name one module,
and an embedding system over them runs end to end, each backend's own options declared and
checked by its own option table, with no file of the plugin changed.

The embedder (``words``): a text's vector counts the words of its ``vocabulary`` option. The
index (``dots``): exact dot products, or (its ``negate`` option) minus them.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from .conftest import lit

EMBEDDER = '''
"""A third party's embedder: word counts over a vocabulary (its own option)."""

import numpy as np

from retrieval_gate.embed import EmbedderBackend, encode_in_chunks, make_identity
from retrieval_gate.schema import Option


class Words:
    def __init__(self, spec):
        self.vocabulary = list(spec.option("vocabulary"))
        self.spec = spec
        self.identity = make_identity(kind="words", model=spec.model, vocabulary=self.vocabulary)

    @property
    def dim(self):
        return len(self.vocabulary)

    def _encode(self, texts):
        return np.array([[t.lower().split().count(w) for w in self.vocabulary] for t in texts],
                        dtype=np.float32)

    def encode_documents(self, texts, *, progress=False):
        return encode_in_chunks(self._encode, texts, dim=self.dim, normalize=self.spec.normalize,
                                chunk_size=self.spec.batch_size)

    def encode_queries(self, texts):
        return self.encode_documents(texts)


BACKEND = EmbedderBackend(
    name="words",
    extra="words",
    options={
        "vocabulary": Option(
            list,
            ["orders", "customers", "payments", "refunds"],
            "the words a vector counts",
            check=lambda v: bool(v) and all(isinstance(w, str) for w in v),
            rule="a non-empty list of words",
        ),
    },
    load=lambda spec, cache_dir, entry: Words(spec),
    summary="word counts over a vocabulary",
)
'''

INDEX = '''
"""A third party's index: exact dot products, or (its own option) minus them."""

import numpy as np

from retrieval_gate.index import IndexBackend
from retrieval_gate.schema import Option


class Dots:
    def __init__(self, negate):
        self.sign = -1.0 if negate else 1.0
        self.ids, self.rows = [], []

    def add(self, ids, vectors):
        self.ids += list(ids)
        self.rows += list(np.asarray(vectors, dtype=np.float32))

    def search(self, queries, k):
        matrix = np.stack(self.rows)
        out = []
        for query in np.asarray(queries, dtype=np.float32):
            scores = [(doc, self.sign * float(s)) for doc, s in zip(self.ids, matrix @ query)]
            # Best first, ties by id descending (the plugin's one tie policy).
            scores.sort(key=lambda kv: kv[0], reverse=True)
            scores.sort(key=lambda kv: -kv[1])
            out.append(scores[:k])
        return out

    def __len__(self):
        return len(self.ids)


BACKEND = IndexBackend(
    name="dots",
    options={"negate": Option(bool, False, "score each document by minus its dot product")},
    open=lambda cache_dir, key, options: Dots(options["negate"]),
    summary="exact dot products in a list",
    approximate=False,
)
'''

DIST_INFO = {
    "METADATA": "Metadata-Version: 2.1\nName: toy-backends\nVersion: 1.0\n",
    "entry_points.txt": (
        "[retrieval_gate.embedders]\nwords = toy_embedder\n\n"
        "[retrieval_gate.indexes]\ndots = toy_index:BACKEND\n"
    ),
}

DOCS = [
    {"id": "d1", "text": "orders customers"},
    {"id": "d2", "text": "payments orders payments"},
    {"id": "d3", "text": "refunds"},
]

SUITE = """
name: words
k: [3]
gates: {Hit@3: 1.0}
queries:
  - {id: q1, query: orders, relevant: [d1]}
  - {id: q2, query: payments, relevant: [d2]}
  - {id: q3, query: refunds customers, relevant: [d3]}
"""


def _settings(**extra: str) -> str:
    lines = "".join(f"{key} = {value}\n" for key, value in extra.items())
    return (
        textwrap.dedent(
            """
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"

        [tool.retrieval_gate]
        corpus = "docs.jsonl"

        [tool.retrieval_gate.system.toy]
        embedder = "words"
        model = "toy-1"
        index = "dots"
        """
        )
        + lines
    )


@pytest.fixture
def toy_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(toy_embedder=EMBEDDER, toy_index=INDEX)
    dist = pytester.path / "toy_backends-1.0.dist-info"
    dist.mkdir()
    for name, text in DIST_INFO.items():
        (dist / name).write_text(text)
    (pytester.path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    pytester.makefile(".retrieval.yaml", words=SUITE)
    pytester.makefile(".toml", pyproject=_settings())
    return pytester


def _output(result: pytest.RunResult) -> pytest.LineMatcher:
    """What the user sees, stdout and stderr (a usage error is on stderr)."""
    return pytest.LineMatcher(result.outlines + result.errlines)


def _run(pytester: pytest.Pytester) -> dict[str, Any]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (run,) = data["runs"]
    assert isinstance(run, dict)
    return run


def test_an_embedder_and_an_index_from_entry_points_run_end_to_end(
    toy_project: pytest.Pytester,
) -> None:
    # A fresh process, as a project that installed the plugin and the backends' package has it.
    result = toy_project.runpytest_subprocess("--retrieval-gate", "-v")
    result.assert_outcomes(passed=1)
    run = _run(toy_project)
    # Unit vectors over (orders, customers, payments, refunds): d1 (1,1,0,0)/sqrt2, d2
    # (1,0,2,0)/sqrt5, d3 (0,0,0,1). Each query's relevant document scores highest: q1 "orders"
    # d1 0.707 > d2 0.447; q2 "payments" d2 0.894; q3 (0,1,0,1)/sqrt2: d3 0.707 > d1 0.5.
    assert run["metrics"]["MRR@3"] == 1.0
    assert [q["ranking"][0] for q in run["queries"]] == ["d1", "d2", "d3"]
    assert run["stats"]["dims"] == 4  # the vocabulary option reached the embedder
    assert run["fingerprint"]["model_identity"].startswith("retrieval-gate-embedder/1 ")
    assert (
        '"vocabulary":["orders","customers","payments","refunds"]'
        in (run["fingerprint"]["model_identity"])
    )

    # The index's own option: scores negated, so each relevant document comes last (rank 3;
    # q2's two zero scores tie ahead of it): MRR@3 = (1/3 + 1/3 + 1/3) / 3.
    toy_project.makefile(".toml", pyproject=_settings(negate="true"))
    reversed_run = toy_project.runpytest_subprocess("--retrieval-gate")
    reversed_run.assert_outcomes(passed=1)
    run = _run(toy_project)
    assert run["metrics"]["MRR@3"] == pytest.approx(1 / 3)
    assert [q["ranking"][-1] for q in run["queries"]] == ["d1", "d2", "d3"]


def test_a_backend_option_is_checked_by_its_own_table(toy_project: pytest.Pytester) -> None:
    toy_project.makefile(".toml", pyproject=_settings(vocabulary='"orders"'))
    result = toy_project.runpytest_subprocess("--retrieval-gate")
    assert result.ret != 0
    _output(result).fnmatch_lines(
        [
            "*"
            + lit(
                "pyproject.toml [system.toy]: invalid 'vocabulary': 'orders'; expected list "
                "(a non-empty list of words)"
            )
        ]
    )
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)


def test_installed_backends_are_listed_and_a_broken_one_is_named(
    toy_project: pytest.Pytester,
) -> None:
    toy_project.makefile(".toml", pyproject=_settings().replace('"dots"', '"faiss"'))
    result = toy_project.runpytest_subprocess("--retrieval-gate")
    _output(result).fnmatch_lines(
        ["*unknown index 'faiss'; known: chroma, chroma-server, dots, exact, lancedb, pgvector*"]
    )
    (toy_project.path / "toy_embedder.py").write_text("raise RuntimeError('half installed')\n")
    result = toy_project.runpytest_subprocess("--retrieval-gate")
    assert result.ret != 0
    _output(result).fnmatch_lines(
        ["*entry point 'words' (toy_embedder) of group retrieval_gate.embedders cannot be loaded*"]
    )
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)
