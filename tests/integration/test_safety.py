"""Nothing the user had is overwritten or silently ignored: outputs, baselines, strict files."""

from __future__ import annotations

import json

import pytest

from .conftest import SUITE, lit, write_suite


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--rg-report=lineage.retrieval.yaml"],
            "--rg-report */lineage.retrieval.yaml matches the suite pattern '*.retrieval.yaml': "
            "writing there would overwrite or add a suite; choose another path",
        ),
        (
            ["--rg-baseline=other.retrieval.json", "--rg-save-baseline"],
            "--rg-baseline */other.retrieval.json matches the suite pattern '*.retrieval.json'*",
        ),
        (
            ["--rg-json=retrieval-baseline.json"],
            "--rg-json and --rg-baseline are both */retrieval-baseline.json; each output needs "
            "its own path",
        ),
        (
            ["--rg-report=cache/r.md", "--rg-cache-dir=cache"],
            "--rg-report */cache/r.md and the cache folder (--rg-cache-dir) */cache overlap*",
        ),
    ],
    ids=["report-is-a-suite", "baseline-would-be-collected", "json-is-the-baseline", "in-cache"],
)
def test_outputs_that_would_destroy_something_are_usage_errors(
    project: pytest.Pytester, args: list[str], message: str
) -> None:
    write_suite(project, SUITE)
    before = (project.path / "lineage.retrieval.yaml").read_bytes()
    result = project.runpytest("--retrieval-gate", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*" + lit(message)])
    assert (project.path / "lineage.retrieval.yaml").read_bytes() == before
    assert not (project.path / "retrieval-gate-report.md").exists()


def test_a_suite_named_on_the_command_line_is_not_an_output(project: pytest.Pytester) -> None:
    write_suite(project, SUITE, name="ground_truth.yaml")
    result = project.runpytest(
        "--retrieval-gate", "ground_truth.yaml", "--rg-report=ground_truth.yaml"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rg-report */ground_truth.yaml is a suite file*"])


def test_a_report_inside_the_corpus_is_refused(project: pytest.Pytester) -> None:
    # corpus = "." would read the gate's own report as a document on the next run.
    (project.path / "doc.txt").write_text("hello", encoding="utf-8")
    settings = (project.path / "pyproject.toml").read_text(encoding="utf-8")
    settings = settings.replace('systems = ["keyword"]', 'systems = ["keyword"]\ncorpus = "."')
    (project.path / "pyproject.toml").write_text(settings, encoding="utf-8")
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--rg-report */retrieval-gate-report.md lies inside the corpus *: the next run would "
            "read it as a document; write it outside the corpus"
        ]
    )


def test_a_report_that_cannot_be_written_fails_the_session(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    (project.path / "blocked").write_text("a file, not a folder", encoding="utf-8")
    result = project.runpytest("--retrieval-gate", "--rg-report=blocked/report.md")
    result.assert_outcomes(passed=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["retrieval gate: could not write the report */blocked/report.md: *"]
    )


def test_an_explicit_baseline_that_does_not_exist_is_a_usage_error(
    project: pytest.Pytester,
) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--rg-baseline=missing.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--rg-baseline */missing.json: no such file; save one with --rg-save-baseline, or drop "
            "the option to run without a baseline"
        ]
    )
    # Saving to a new path is what the option is for.
    project.runpytest("--retrieval-gate", "--rg-baseline=missing.json", "--rg-save-baseline")
    assert (project.path / "missing.json").is_file()


def test_a_baseline_without_this_run_says_so(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline")
    result = project.runpytest("--retrieval-gate", "--rg-system=reverse")
    note = (
        "retrieval-baseline.json has no run for lineage x reverse: nothing to compare; save one "
        "with --rg-save-baseline"
    )
    result.stdout.fnmatch_lines(["*reverse vs baseline: " + lit(note)])
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert f"No baseline run: {note}." in markdown


def test_nan_in_a_baseline_is_refused(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline")
    path = project.path / "retrieval-baseline.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["runs"]["lineage::keyword"]["queries"]["refunds"]["metrics"]["P@1"] = float("nan")
    path.write_text(json.dumps(data), encoding="utf-8")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*retrieval-baseline.json "
            + lit("[lineage::keyword query refunds]")
            + ": corrupt baseline: P@1 is nan; metric values must be finite; restore it from"
            " version control or save a new one with --rg-save-baseline"
        ]
    )


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "dup.retrieval.yaml",
            SUITE.replace("  P@1: 0.5\n", "  P@1: 0.99\n  R@1: 0.1\n  P@1: 0.1\n"),
            "dup.retrieval.yaml: key 'P@1' is given twice at line 7; keep one",
        ),
        (
            "dup.retrieval.json",
            '{"queries": [{"id": "a", "query": "x", "relevant": ["d"], "id": "b"}]}',
            "dup.retrieval.json: key 'id' is given twice; keep one",
        ),
        (
            "huge.retrieval.yaml",
            SUITE.replace("k: [1, 3]", "k: [1, 1000000000000000000000000000000]"),
            "huge.retrieval.yaml: invalid 'k': [1, 1000000000000000000000000000000]; expected "
            "integer or list (a cutoff or a list of them, each 1 to 100000: every system "
            "retrieves that many results per query)",
        ),
    ],
    ids=["yaml-duplicate", "json-duplicate", "k-too-large"],
)
def test_suite_mistakes_that_used_to_pass_silently(
    project: pytest.Pytester, name: str, text: str, message: str
) -> None:
    write_suite(project, text, name=name)
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*" + lit(message)])
