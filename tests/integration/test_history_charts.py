"""The History section's trend charts (report/history.py), rendered by the real mermaid in
headless Chromium: one line chart per system and gated metric, each with its line drawn. Skips,
with the reason, where Chromium or mermaid-cli is absent (see test_mermaid_charts.py)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from retrieval_gate.report.history import LINE_COLOUR

from .conftest import write_suite
from .png import png_rgb
from .test_mermaid_charts import APP, CHROMIUM, MMDC, SETTINGS, SUITE

pytestmark = pytest.mark.skipif(
    MMDC is None or CHROMIUM is None,
    reason="rendering the charts needs Chromium and mermaid-cli (see test_mermaid_charts.py)",
)


def _line_pixels(path: object, enough: int = 20) -> int:
    """Pixels within 12 of the line colour on each channel, counted up to ``enough``: pure
    Python over a whole chart is most of this test's CPU, and the test asks only whether the
    line is there."""
    tr, tg, tb = bytes.fromhex(LINE_COLOUR.removeprefix("#"))
    _, _, rows = png_rgb(path)  # type: ignore[arg-type]
    found = 0
    for row in rows:
        for x in range(0, len(row), 3):
            if abs(row[x] - tr) <= 12 and abs(row[x + 1] - tg) <= 12 and abs(row[x + 2] - tb) <= 12:
                found += 1
                if found == enough:
                    return found
    return found


def test_every_systems_trend_line_is_drawn(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(fixed_app=APP)
    pytester.syspathinsert()
    write_suite(pytester, SUITE, name="charts.retrieval.yaml")
    for _ in range(2):
        pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    pytester.runpytest("--retrieval-gate")
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    history = markdown.split("### History", 1)[1]
    blocks = re.findall(r"```mermaid\n(.*?)```", history, flags=re.S)
    titles = [re.search(r'title "(.*)"', b).group(1) for b in blocks]  # type: ignore[union-attr]
    assert titles == [f"charts: {s}: MRR@3" for s in ("good", "mid", "poor")]
    # This run's point carries its date, and its commit where CI names one (no repository here).
    today = r'"now (?:[0-9a-f]{7} )?\d{4}-\d\d-\d\d"'
    assert all(re.search(today, b) and "(anchor)" in b for b in blocks)

    charts = pytester.path / "trends.md"
    charts.write_text("".join(f"```mermaid\n{b}```\n\n" for b in blocks), encoding="utf-8")
    config = pytester.path / "puppeteer.json"
    config.write_text(
        json.dumps({"executablePath": CHROMIUM, "args": ["--no-sandbox", "--headless"]})
    )
    out = pytester.path / "rendered.md"
    command = [str(MMDC), "-i", str(charts), "-o", str(out), "-e", "png", "-p", str(config)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    images = sorted(pytester.path.glob("rendered-*.png"), key=lambda p: int(p.stem.split("-")[-1]))
    assert len(images) == len(blocks)
    for title, image in zip(titles, images, strict=True):
        assert _line_pixels(image) >= 20, title  # the system's line is there
