"""JUnit XML properties: each decided item's figures as ``<property>`` elements (pytest's own
``--junitxml`` writes them from the item's ``user_properties``), so CI dashboards can chart
the values."""

from __future__ import annotations

from retrieval_gate.records import Outcome
from retrieval_gate.report import Writer


def properties(outcome: Outcome) -> list[tuple[str, object]]:
    return outcome.properties()


WRITER = Writer(name="junit", item_properties=properties)
