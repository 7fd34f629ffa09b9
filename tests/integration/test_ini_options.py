"""The ini twins of the path options and the suite file patterns.

``retrieval_gate_report``, ``retrieval_gate_json``, ``retrieval_gate_baseline``,
``retrieval_gate_cache_dir`` and ``retrieval_gate_files`` in ``[tool.pytest.ini_options]`` or
``pytest.ini`` take effect; their paths are relative to the rootdir (wherever pytest is started),
and the matching ``--rg-*`` option, relative to the current folder, wins over them.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from .conftest import SUITE, write_suite

SYSTEM = """
[tool.retrieval_gate.system.keyword]
retriever = "search_app:retrieve"
"""


def _ini(pytester: pytest.Pytester, style: str, **values: str) -> None:
    """Write the ini values in the given style, beside the retrieval-gate settings."""
    lines = "\n".join(f'{key} = "{value}"' for key, value in values.items())
    if style == "pyproject":
        pytester.makefile(
            ".toml",
            pyproject=f'[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n{lines}\n'
            + SYSTEM,
        )
    else:
        plain = "\n".join(f"{key} = {value}" for key, value in values.items())
        pytester.makeini(f"[pytest]\naddopts = -p no:cacheprovider\n{plain}\n")
        pytester.makefile(".toml", pyproject=SYSTEM)


def _files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


@pytest.mark.parametrize("style", ["pyproject", "pytest.ini"])
def test_ini_report_and_json_paths_are_relative_to_the_rootdir(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    _ini(
        project,
        style,
        retrieval_gate_report="reports/gate.md",
        retrieval_gate_json="reports/data/gate.json",
    )
    # Started from a sub folder: the ini paths still resolve against the rootdir.
    write_suite(project, SUITE, name="suites/lineage.retrieval.yaml")
    monkeypatch.chdir(project.path / "suites")
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=5)
    assert (project.path / "reports" / "gate.md").read_text().startswith("# Retrieval gate report")
    assert json.loads((project.path / "reports" / "data" / "gate.json").read_text())["passed"]
    assert not (project.path / "retrieval-gate-report.md").exists()
    assert not (project.path / "suites" / "reports").exists()


def test_ini_json_defaults_beside_the_ini_report(project: pytest.Pytester) -> None:
    _ini(project, "pyproject", retrieval_gate_report="reports/gate.md")
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate").assert_outcomes(passed=5)
    assert (project.path / "reports" / "gate.json").is_file()


def test_report_options_win_over_the_ini_and_are_relative_to_the_current_folder(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ini(
        project,
        "pyproject",
        retrieval_gate_report="reports/gate.md",
        retrieval_gate_json="reports/gate.json",
    )
    write_suite(project, SUITE, name="suites/lineage.retrieval.yaml")
    monkeypatch.chdir(project.path / "suites")
    result = project.runpytest("--retrieval-gate", "--rg-report=cli.md", "--rg-json=cli.json")
    result.assert_outcomes(passed=5)
    assert (project.path / "suites" / "cli.md").is_file()
    assert json.loads((project.path / "suites" / "cli.json").read_text())["passed"] is True
    assert not (project.path / "reports").exists()


@pytest.mark.parametrize("style", ["pyproject", "pytest.ini"])
def test_ini_baseline_is_saved_and_read_where_it_says(project: pytest.Pytester, style: str) -> None:
    _ini(project, style, retrieval_gate_baseline="gates/accepted.json")
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=5)
    saved = project.path / "gates" / "accepted.json"
    assert "lineage" in json.dumps(json.loads(saved.read_text()))
    assert not (project.path / "retrieval-baseline.json").exists()
    # Read back on the next run: regression items against it appear and the report compares.
    result = project.runpytest("--retrieval-gate", "-v")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*lineage.retrieval.yaml::keyword::regression::*"])
    markdown = (project.path / "retrieval-gate-report.md").read_text()
    assert "### `keyword` against the baseline" in markdown


def test_baseline_option_wins_over_the_ini(project: pytest.Pytester) -> None:
    _ini(project, "pyproject", retrieval_gate_baseline="gates/accepted.json")
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--rg-save-baseline", "--rg-baseline=cli.json")
    result.assert_outcomes(passed=5)
    assert "lineage" in json.dumps(json.loads((project.path / "cli.json").read_text()))
    assert not (project.path / "gates").exists()


@pytest.mark.parametrize("style", ["pyproject", "pytest.ini"])
def test_ini_files_patterns_collect_a_differently_named_suite(
    project: pytest.Pytester, style: str
) -> None:
    # Replaces the default patterns: *.gate.yaml is a suite, *.retrieval.yaml no longer is.
    _ini(project, style, retrieval_gate_files="*.gate.yaml")
    write_suite(project, SUITE, name="checks/lineage.gate.yaml")
    write_suite(project, SUITE.replace("name: lineage", "name: ignored"), name="x.retrieval.yaml")
    result = project.runpytest("--retrieval-gate", "--collect-only", "-q")
    collected = [line for line in result.stdout.lines if "::" in line]
    assert collected and all(line.startswith("checks/lineage.gate.yaml::") for line in collected)
    assert len(collected) == 5


def test_ini_files_takes_several_patterns(project: pytest.Pytester) -> None:
    project.makefile(
        ".toml",
        pyproject='[tool.pytest.ini_options]\nretrieval_gate_files = ["*.gate.yaml", "*.qa.json"]\n'
        + SYSTEM,
    )
    write_suite(project, SUITE, name="lineage.gate.yaml")
    suite = yaml.safe_load(textwrap.dedent(SUITE))
    suite["name"] = "other"
    (project.path / "other.qa.json").write_text(json.dumps(suite))
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=10)


# -- the cache folder: only an embedding system writes one --------------------------------------


CORPUS = {
    "sql/orders.sql": "orders table join customers on customer id",
    "sql/customers.sql": "customers table with customer id and name",
    "sql/payments.sql": "payments join orders on order id",
    "docs/lineage.md": "lineage of the orders pipeline",
    "docs/faq.md": "frequently asked questions about refunds",
}


@pytest.fixture(scope="module")
def static_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model2vec model (a random 8-dim vector per corpus word): no download, no
    distillation, so an embedding system runs in milliseconds and writes its cache."""
    np = pytest.importorskip("numpy")
    model2vec = pytest.importorskip("model2vec")
    tokenizers = pytest.importorskip("tokenizers")
    models = pytest.importorskip("tokenizers.models")
    pre_tokenizers = pytest.importorskip("tokenizers.pre_tokenizers")

    words = dict.fromkeys(w for text in CORPUS.values() for w in text.split())
    vocab = {"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tokenizer = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(0).random((len(vocab), 8)).astype(np.float32)
    folder = tmp_path_factory.mktemp("static-model")
    model2vec.StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True).save_pretrained(
        str(folder)
    )
    return folder


def _embedding_project(pytester: pytest.Pytester, model: Path, ini: str) -> None:
    for name, text in CORPUS.items():
        path = pytester.path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    pytester.makefile(
        ".toml",
        pyproject=f"""
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"
        {ini}

        [tool.retrieval_gate.system.static]
        embedder = "model2vec"
        model = "{model.as_posix()}"
        corpus = "corpus"
        index = "exact"
        """,
    )
    # Gates at 0 so the outcome does not depend on the random vectors' ranking.
    write_suite(pytester, "name: lineage\nk: [3]\ngates: {R@3: 0.0}\n" + _queries())


def _queries() -> str:
    return textwrap.dedent(SUITE[SUITE.index("queries:") :]).replace(
        "    expect: {found_within: 1}\n", ""
    )


def test_ini_cache_dir_is_where_the_embeddings_go(
    pytester: pytest.Pytester, static_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _embedding_project(pytester, static_model, 'retrieval_gate_cache_dir = "build/rg-cache"')
    (pytester.path / "sub").mkdir()
    monkeypatch.chdir(pytester.path / "sub")
    pytester.runpytest("--retrieval-gate", str(pytester.path)).assert_outcomes(passed=1)
    cached = _files(pytester.path / "build" / "rg-cache")
    assert cached and all(name.startswith("embeddings/") for name in cached)
    assert not (pytester.path / ".retrieval-gate-cache").exists()
    assert not (pytester.path / "sub" / "build").exists()


def test_cache_dir_option_wins_over_the_ini(pytester: pytest.Pytester, static_model: Path) -> None:
    _embedding_project(pytester, static_model, 'retrieval_gate_cache_dir = "build/rg-cache"')
    result = pytester.runpytest("--retrieval-gate", "--rg-cache-dir=cli-cache")
    result.assert_outcomes(passed=1)
    assert _files(pytester.path / "cli-cache")
    assert not (pytester.path / "build").exists()
    assert not (pytester.path / ".retrieval-gate-cache").exists()
