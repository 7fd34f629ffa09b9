"""The settings that choose and bound the regression rule: ``verdicts``, ``resolution`` and
``strict_verdicts`` (which belongs to the margin rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.config import Settings
from retrieval_gate.config.settings import parse_settings
from retrieval_gate.errors import ConfigError

SOURCE = Path("/project/pyproject.toml")


def parse(**table: Any) -> Settings:
    return parse_settings(table, SOURCE)


def test_the_tolerance_rule_is_the_default() -> None:
    settings = parse()
    assert (settings.verdicts, settings.strict_verdicts, dict(settings.resolution)) == (
        "tolerance",
        False,
        {},
    )
    assert settings.max_resolution("nDCG@10") is None


def test_the_margin_rule_is_a_choice_and_keeps_strict_verdicts() -> None:
    settings = parse(verdicts="margin", strict_verdicts=True)
    assert (settings.verdicts, settings.strict_verdicts) == ("margin", True)


def test_strict_verdicts_without_the_margin_rule_is_an_error() -> None:
    with pytest.raises(
        ConfigError, match="'strict_verdicts' applies to verdicts = \"margin\" only"
    ):
        parse(strict_verdicts=True)


def test_an_unknown_rule_names_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match="'verdicts' must be one of 'tolerance', 'margin', got 'p'"
    ):
        parse(verdicts="p")


def test_resolution_for_every_metric_or_per_metric() -> None:
    assert parse(resolution=0.05).max_resolution("MRR@10") == 0.05
    per = parse(resolution={"nDCG@10": 0.03, "mrr@10": 0.04})
    # Names are the metrics' own spellings, as tolerances are.
    assert dict(per.resolution) == {"nDCG@10": 0.03, "MRR@10": 0.04}
    assert (per.max_resolution("MRR@10"), per.max_resolution("R@10")) == (0.04, None)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "resolution must be a finite number > 0, got 0"),
        (True, "resolution must be a finite number > 0, got True"),
        ({"nDCG@10": -1}, "resolution must be a finite number > 0, got -1"),
        # An infinite resolution is no limit at all: leave the setting out instead.
        (float("inf"), "resolution must be a finite number > 0, got inf"),
        ({"nDCG@10": float("inf")}, "resolution must be a finite number > 0, got inf"),
        ({"nope@3": 0.1}, "unknown metric"),
        ({"latency_p95_ms": 5}, "latency is gated by ceilings, not baseline resolutions"),
    ],
)
def test_bad_resolutions_are_named(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse(resolution=value)
    assert info.value.entry is not None and info.value.entry.startswith("resolution")
