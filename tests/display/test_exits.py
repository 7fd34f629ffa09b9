"""Exits where outside text reaches a user that pytest, not the plugin, prints: the plugin's
warnings (pytest's warnings summary prints a message as it is), a bad option value's usage
error (argparse quotes what the type function says), and the completion check's one line.
Each passes display: credentials masked, control characters escaped."""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from retrieval_gate import plugin
from retrieval_gate.display import forget_secrets, register_secret
from retrieval_gate.errors import CacheWarning, VectorWarning
from retrieval_gate.report.complete import main as complete

KEY = "Zq7kV3/unique+KEY/9xwAb"


@pytest.fixture(autouse=True)
def no_registered_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


@pytest.mark.parametrize("category", [CacheWarning, VectorWarning])
def test_a_warning_of_the_plugin_is_shown_masked_and_escaped(category: type[Warning]) -> None:
    # On 65934fb: the message as made, escape sequence and password raw.
    with pytest.warns(category) as caught:
        warnings.warn(
            "embedding cache /c\x1b]0;x\x07 cannot be written (postgresql://u:pw9@h)",
            category,
            stacklevel=1,
        )
    assert str(caught[0].message) == (
        "embedding cache /c\\x1b]0;x\\x07 cannot be written (postgresql://u:***@h)"
    )


def test_a_registered_secret_in_a_warning_is_masked_in_its_encoded_forms() -> None:
    register_secret(KEY)
    with pytest.warns(CacheWarning) as caught:
        warnings.warn(
            'cache of {"key": "Zq7kV3\\/unique+KEY\\/9xwAb"} dropped', CacheWarning, stacklevel=1
        )
    assert str(caught[0].message) == 'cache of {"key": "***"} dropped'


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        # On 65934fb: the key quoted whole (issue 40).
        (
            plugin._ref_value,
            "sk-proj-abcdef1234567890XYZ now",
            "invalid ref '*** now': give a tag, a branch or a commit (a name without spaces or a "
            "leading '-')",
        ),
        (
            plugin._system_name,
            "postgresql://u:pw9@h",
            "invalid system name 'postgresql://u:***@h': use letters, digits, '-', '_' or '.'",
        ),
        (plugin._path_value, "\u2028 ", "invalid path '\\u2028 ': must not be empty"),
        (
            plugin._floors_target,
            "s3://k:pw9@b/f.yml",
            "invalid path 's3://k:***@b/f.yml': a .yml file could be a suite; write the diff to "
            "a .diff file, or '-' for the terminal",
        ),
    ],
    ids=["ref", "system", "path", "floors"],
)
def test_a_bad_option_value_is_quoted_masked_in_its_usage_error(
    parse: Callable[[str], str], value: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        parse(value)
    assert str(raised.value) == message


def test_the_completion_check_shows_a_hostile_path_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # On 65934fb: the escape sequence reached the terminal raw.
    path = tmp_path / "r\x1b]0;x\x07\u202e.json"
    assert complete([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"retrieval gate: {tmp_path}/r\\x1b]0;x\\x07\\u202e.json was not written" in err
    assert "\x1b" not in err and "\u202e" not in err
