"""JUnit XML: each decided item's figures as ``<property>`` elements (pytest's own
``--junitxml`` writes them from the item's ``user_properties``), so CI dashboards can chart
the values; and each gate item's test case named by its last node id part, in the class of
the parts before it.

pytest's JUnit writer keeps the file name's dots in the class, so a viewer nests
``lineage``, ``retrieval`` and ``yaml`` as packages, and reads a ``[`` as the start of a
parametrisation. :class:`JunitNames` sets ``classname``
``lineage_retrieval_yaml.minilm.category:joins`` and ``name`` ``P@5`` for
``lineage.retrieval.yaml::minilm::category:joins::P@5`` (the file name's dots made ``_``). It runs
where the XML is written (the xdist controller too), from the test reports alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from retrieval_gate.display import shown
from retrieval_gate.records import Outcome
from retrieval_gate.report import Writer


def properties(outcome: Outcome) -> list[tuple[str, object]]:
    # A scope names a query by its id (query[...]): escaped and redacted as everything shown.
    return [
        (name, shown(value) if isinstance(value, str) else value)
        for name, value in outcome.properties()
    ]


WRITER = Writer(name="junit", item_properties=properties)

#: The marker every gate item carries (collect.py); a report's keywords hold it.
GATE_MARKER = "retrieval_gate"


def junit_names(nodeid: str, prefix: str | None = None) -> tuple[str, str]:
    """(classname, name) of a gate item's test case: the file's folders as a dotted path, then
    the file name and every node id part but the last, each with its own dots made ``_`` (a
    viewer nests a classname's dots as packages: ``lineage.retrieval.yaml`` would be three), as
    the class; the last part as the name."""
    path, *names = nodeid.split("::")
    *folders, file = path.split("/")
    classes = [*folders, *(part.replace(".", "_") for part in (file, *names[:-1]))]
    if prefix:
        classes.insert(0, prefix)
    return ".".join(classes), names[-1] if names else path


class JunitNames:
    """Names each gate item's JUnit test case (see the module docstring); registered only
    with ``--junitxml``."""

    def __init__(
        self,
        config: pytest.Config,
        suite_properties: list[tuple[str, object]] | None = None,
        at_end: Callable[[], list[tuple[str, object]]] | None = None,
    ) -> None:
        """``suite_properties``: the test suite's properties known at the start (the baseline's
        age); ``at_end``: those known once every item ran (what the session accepts)."""
        self.config = config
        self.suite_properties = suite_properties or []
        self.at_end = at_end

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The session's own figures (the baseline's age, docs/baselines.md) as properties of
        the test suite; pytest's writer exists only once every plugin is configured."""
        xml = _log_xml(self.config)
        if xml is None or not hasattr(xml, "add_global_property"):
            return
        for name, value in self.suite_properties:
            xml.add_global_property(name, value)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The properties known once every item ran, before pytest's writer writes the file
        (it writes in its own ``pytest_sessionfinish``, which runs before the gate's)."""
        xml = _log_xml(self.config)
        if self.at_end is None or xml is None or not hasattr(xml, "add_global_property"):
            return
        for name, value in self.at_end():
            xml.add_global_property(shown(name), shown(value) if isinstance(value, str) else value)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if GATE_MARKER not in report.keywords or "::" not in report.nodeid:
            return
        xml = _log_xml(self.config)
        if xml is None:
            return
        # Attributes added before the writer records the report override the ones it derives.
        classname, name = junit_names(report.nodeid, getattr(xml, "prefix", None))
        reporter = xml.node_reporter(report)
        reporter.add_attribute("classname", classname)
        reporter.add_attribute("name", name)


def _log_xml(config: pytest.Config) -> Any:
    """pytest's JUnit writer of this session, None without ``--junitxml`` (or if a future pytest
    keeps it elsewhere: the names are then pytest's own)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:
        return None
    xml = config.stash.get(xml_key, None)
    return xml if hasattr(xml, "node_reporter") else None
