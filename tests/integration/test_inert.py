"""Without --retrieval-gate the plugin collects nothing and imports nothing heavy."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from .conftest import SUITE, lit, write_suite

HEAVY = (
    "numpy",
    "yaml",
    "torch",
    "chromadb",
    "sentence_transformers",
    "model2vec",
    "scipy",
    "psycopg",
    "lancedb",
    "pyarrow",
    "ray",
    "pgserver",
)

PROBE = f"""
import sys

def pytest_sessionfinish(session):
    loaded = [m for m in {HEAVY!r} if m in sys.modules]
    plugin = session.config.pluginmanager.get_plugin("retrieval_gate.plugin")
    own = sorted(m for m in sys.modules if m.startswith("retrieval_gate"))
    print("HEAVY", loaded, "PLUGIN", plugin is not None, "OWN", own)
"""


def test_entry_point_is_named_retrieval_gate() -> None:
    (ep,) = [ep for ep in entry_points(group="pytest11") if ep.name == "retrieval_gate"]
    assert ep.value == "retrieval_gate.plugin"


def test_without_the_flag_nothing_is_collected_or_imported(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, SUITE)
    project.makeconftest(PROBE)
    # Only this plugin: other installed plugins may import numpy themselves.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = project.runpytest_subprocess("-p", "retrieval_gate.plugin", "-s")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    # The entry module, the stash key and the declarations of the report writers' outputs
    # (their options are offered): not even the settings or option parsing.
    own = str(
        [
            "retrieval_gate",
            "retrieval_gate.files",
            "retrieval_gate.files.outputs",
            "retrieval_gate.keys",
            "retrieval_gate.plugin",
            "retrieval_gate.version",
        ]
    )
    result.stdout.fnmatch_lines([lit(f"HEAVY [] PLUGIN True OWN {own}")])


def test_with_the_flag_the_suite_is_collected(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, SUITE)
    project.makeconftest(PROBE)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = project.runpytest_subprocess("-p", "retrieval_gate.plugin", "--retrieval-gate", "-s")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*HEAVY [[]'numpy', 'yaml'[]] PLUGIN True *"])


def test_disabled_by_its_entry_point_name(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest_subprocess("-p", "no:retrieval_gate", "--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --retrieval-gate*"])
