"""The report's mermaid charts, rendered by the real mermaid (npm's @mermaid-js/mermaid-cli) in
headless Chromium, show every system's bar: one series per chart, so no bar hides another.

Skipped, with the reason, where Chromium or ``mmdc`` is absent. ``RETRIEVAL_GATE_MMDC`` names
the ``mmdc`` executable (default: ``/opt/mermaid/node_modules/.bin/mmdc``, then ``PATH``) and
``RETRIEVAL_GATE_CHROMIUM`` the browser (default: ``chromium`` on ``PATH``). To install both
(Debian): ``apt-get install chromium`` and, in a folder outside the repository,
``PUPPETEER_SKIP_DOWNLOAD=1 npm install @mermaid-js/mermaid-cli``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from retrieval_gate.report.markdown import BAR_COLOUR

from .conftest import write_suite
from .png import png_rgb


def _tool(variable: str, *candidates: str) -> str | None:
    named = os.environ.get(variable)
    if named:
        return named if Path(named).is_file() or shutil.which(named) else None
    for candidate in candidates:
        found = candidate if Path(candidate).is_file() else shutil.which(candidate)
        if found:
            return found
    return None


MMDC = _tool("RETRIEVAL_GATE_MMDC", "/opt/mermaid/node_modules/.bin/mmdc", "mmdc")
CHROMIUM = _tool("RETRIEVAL_GATE_CHROMIUM", "chromium", "chromium-browser")

pytestmark = pytest.mark.skipif(
    MMDC is None or CHROMIUM is None,
    reason="rendering the charts needs Chromium and mermaid-cli: apt-get install chromium; "
    "PUPPETEER_SKIP_DOWNLOAD=1 npm install @mermaid-js/mermaid-cli (set RETRIEVAL_GATE_MMDC "
    f"to its mmdc; found mmdc={MMDC}, chromium={CHROMIUM})",
)

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.good]
retriever = "fixed_app:good"

[tool.retrieval_gate.system.mid]
retriever = "fixed_app:mid"

[tool.retrieval_gate.system.poor]
retriever = "fixed_app:poor"
"""

# Each system finds every query's document, at rank 1 (good), 2 (mid), or 3 and 1 (poor):
# MRR@3 1, 0.5 and (1/3 + 1) / 2; every bar is above 0, so every bar must show.
APP = """
DOCS = ["a", "b", "c"]

def _ranked(first, query):
    rest = [d for d in DOCS if d != query]
    order = rest[: first - 1] + [query] + rest[first - 1 :]
    return [(doc, float(10 - i)) for i, doc in enumerate(order)]

def good(query, k):
    return _ranked(1, query)[:k]

def mid(query, k):
    return _ranked(2, query)[:k]

def poor(query, k):
    return _ranked(3 if query == "a" else 1, query)[:k]
"""

SUITE = """
name: charts
k: [3]
gates: {MRR@3: 0.1}
queries:
  - {id: qa, query: a, relevant: [a]}
  - {id: qb, query: b, relevant: [b]}
"""


def _bars(path: Path) -> list[int]:
    """The height in pixels of each bar (a run of columns holding the bar colour), left to
    right."""
    target = bytes.fromhex(BAR_COLOUR.removeprefix("#"))
    width, height, rows = png_rgb(path)

    def is_bar(pixel: bytes) -> bool:
        return all(abs(a - b) <= 6 for a, b in zip(pixel, target, strict=True))

    heights = [
        sum(1 for y in range(height) if is_bar(rows[y][3 * x : 3 * x + 3])) for x in range(width)
    ]
    bars: list[list[int]] = []
    for x, h in enumerate(heights):
        if h >= 3:
            if bars and bars[-1][0] == x - 1:
                bars[-1] = [x, max(bars[-1][1], h)]
            else:
                bars.append([x, h])
    return [h for _, h in bars]


def test_each_system_has_a_visible_bar_in_every_chart(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(fixed_app=APP)
    pytester.syspathinsert()
    write_suite(pytester, SUITE, name="charts.retrieval.yaml")
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=3)
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```mermaid\n(.*?)```", markdown, flags=re.S)
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    values = {run["system"]: run["metrics"] for run in report["runs"]}
    metrics = [re.search(r'title "charts: (.*)"', block).group(1) for block in blocks]  # type: ignore[union-attr]
    assert metrics[:2] == ["MRR@3", "nDCG@3"]

    charts = pytester.path / "charts.md"
    charts.write_text("".join(f"```mermaid\n{b}```\n\n" for b in blocks), encoding="utf-8")
    config = pytester.path / "puppeteer.json"
    config.write_text(
        json.dumps(
            {
                "executablePath": CHROMIUM,
                "args": [
                    "--no-sandbox",
                    "--headless",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                ],
            }
        )
    )
    out = pytester.path / "rendered.md"
    command = [str(MMDC), "-i", str(charts), "-o", str(out), "-e", "png", "-p", str(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    images = sorted(pytester.path.glob("rendered-*.png"), key=lambda p: int(p.stem.split("-")[-1]))
    assert len(images) == len(blocks)
    systems = ["good", "mid", "poor"]
    for metric, image in zip(metrics, images, strict=True):
        heights = _bars(image)
        # One bar per system, left to right as the x axis names them, none hidden.
        assert len(heights) == len(systems), (metric, heights)
        shown = [values[s][metric] for s in systems]
        # Taller bars for larger values (within a pixel of rounding).
        for (h1, v1), (h2, v2) in zip(
            zip(heights, shown, strict=True), zip(heights[1:], shown[1:], strict=True), strict=False
        ):
            if v1 > v2 + 0.05:
                assert h1 > h2, (metric, heights, shown)
            elif v2 > v1 + 0.05:
                assert h2 > h1, (metric, heights, shown)
