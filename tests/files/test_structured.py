"""Strict reading of user files and the sweep of temporary files killed writers left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_gate.files.atomic import sweep_stale_temps, write_text_atomic
from retrieval_gate.files.structured import DuplicateKeyError, load_json, load_yaml


def test_yaml_duplicate_key_names_key_and_line() -> None:
    with pytest.raises(DuplicateKeyError, match=r"key 'b' is given twice at line 3; keep one"):
        load_yaml("a: 1\nb: 2\nb: 3\n")


def test_yaml_duplicates_in_nested_mappings_too() -> None:
    with pytest.raises(DuplicateKeyError, match=r"key 'x' is given twice at line 3"):
        load_yaml("gates:\n  x: 1\n  x: 2\n")


def test_yaml_without_duplicates_loads_as_safe_load_does() -> None:
    assert load_yaml("a: [1, 2]\nb: {c: d}\n") == {"a": [1, 2], "b": {"c": "d"}}


def test_yaml_stays_safe() -> None:
    import yaml

    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']")


SUITE_LIKE = """\
name: answers  # a comment
k: [1, 5]
gates: {P@5: 0.5, "nDCG@10": .25}
queries:
  - id: q1
    query: "what's a \\"quote\\"? é 😀"
    relevant: [d1, d2]
    graded: {d1: 2, d2: 1}
    when: 2024-01-31
    note: |
      two
      lines
  - id: 007
    query: yes
    relevant: []
    big: 123456789012345678901234567890
    none: ~
    anchor: &x [1, 2]
    again: *x
"""


def test_yaml_through_libyaml_equals_the_pure_parser() -> None:
    """libyaml reads where PyYAML has it (five times faster); a suite's values are the ones
    the pure-Python safe loader gives, types included (dates, big integers, octal-looking ids,
    ``yes``, anchors)."""
    import yaml

    from retrieval_gate.files.structured import _strict_loaders

    fast, pure = _strict_loaders()
    assert fast is not pure  # every PyYAML wheel on PyPI is built with libyaml
    expected = yaml.load(SUITE_LIKE, Loader=pure)
    assert load_yaml(SUITE_LIKE) == expected
    assert repr(load_yaml(SUITE_LIKE)) == repr(expected)
    assert expected["queries"][1]["id"] == 7 and expected["queries"][1]["query"] is True


@pytest.mark.parametrize(
    ("text", "problem", "line", "column"),
    [
        ("a: b: c", "mapping values are not allowed here", 0, 4),
        ("a: [1, 2", "expected ',' or ']', but got '<stream end>'", 0, 8),
        ("a:\n\t- x", "found character '\\t' that cannot start any token", 1, 0),
    ],
)
def test_a_yaml_mistake_is_named_by_the_pure_parser(
    text: str, problem: str, line: int, column: int
) -> None:
    """What libyaml refuses is parsed again by the pure parser, so a mistake's words and place
    are the same whichever parser PyYAML was built with (libyaml words them differently)."""
    import yaml

    with pytest.raises(yaml.MarkedYAMLError) as caught:
        load_yaml(text)
    assert caught.value.problem == problem
    assert caught.value.problem_mark is not None
    assert (caught.value.problem_mark.line, caught.value.problem_mark.column) == (line, column)


def test_json_duplicate_key() -> None:
    with pytest.raises(DuplicateKeyError, match=r"key 'a' is given twice; keep one"):
        load_json('{"a": 1, "a": 2}')
    assert load_json('{"a": {"b": [1]}}') == {"a": {"b": [1]}}


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(proc.stdout)


def test_temps_of_dead_writers_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    target = tmp_path / "retrieval-baseline.json"
    dead = tmp_path / f".retrieval-baseline.json.{_dead_pid()}.abc.tmp"
    live = tmp_path / f".retrieval-baseline.json.{os.getppid()}.def.tmp"
    other = tmp_path / f".other.json.{_dead_pid()}.ghi.tmp"
    for path in (dead, live, other):
        path.write_text("partial", encoding="utf-8")
    write_text_atomic(target, "{}\n")
    assert target.read_text(encoding="utf-8") == "{}\n"
    assert not dead.exists()
    assert live.exists()  # its writer may still be renaming it into place
    assert other.exists()  # not a temporary of this file
    assert sweep_stale_temps(target) == []


def test_nesting_is_measured_before_a_parser_recurses() -> None:
    from retrieval_gate.files.structured import nested_deeper

    assert not nested_deeper('{"a": [1, {"b": [2]}]}', 4)
    assert nested_deeper('{"a": [1, {"b": [2]}]}', 3)
    assert not nested_deeper('["[[[[[[", "{{{{"]', 1)  # brackets in strings are text
    assert not nested_deeper('["\\"[[[[", 1]', 1)  # an escaped quote does not end the string
    assert nested_deeper("[" * 200_000, 100)  # json.loads would raise RecursionError
    assert not nested_deeper("[" * 100 + "]" * 100, 100)
    assert nested_deeper("[]" * 10_000 + "[" * 101, 100)
    assert not nested_deeper(("[" * 99 + "]" * 99) * 6_000, 100)  # many brackets, none deeper
    assert nested_deeper(("[" * 99 + "]" * 99) * 6_000 + "[" * 101, 100)


def test_json_nested_200000_deep_is_one_line(tmp_path: Path) -> None:
    from retrieval_gate.errors import RetrievalGateError
    from retrieval_gate.files.read import parse_structured

    with pytest.raises(RetrievalGateError, match=r"x\.json: nested more than 100 levels deep"):
        parse_structured("[" * 200_000, format="json", path=tmp_path / "x.json")
