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
        ConfigError, match=r"invalid 'verdicts': 'p'; expected string \(tolerance, margin\)"
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
        (0, "toml: invalid 'resolution': 0; expected integer or number or table of metric -> "),
        (True, "toml: invalid 'resolution': True; expected "),
        ({"nDCG@10": -1}, "toml [resolution]: invalid 'nDCG@10': -1; expected integer or number"),
        # An infinite resolution is no limit at all: leave the setting out instead.
        (float("inf"), "toml: invalid 'resolution': inf; numbers must be finite"),
        ({"nDCG@10": float("inf")}, "toml [resolution]: invalid 'nDCG@10': inf; numbers must be"),
        ({"nope@3": 0.1}, "toml [resolution]: unknown metric 'nope@3'"),
        ({"latency_p95_ms": 5}, "[resolution]: latency is gated by ceilings, not baseline resolu"),
        ({"P@1": 0.1, "p@1": 0.2}, "toml [resolution]: P@1 is given twice"),
    ],
)
def test_bad_resolutions_are_named(value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(resolution=value)
    assert message in str(info.value)
