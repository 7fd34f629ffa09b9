"""What report writers declare they write (files/outputs.py) and how the plugin reads it: the
built-in writers declare exactly the outputs plugin.py offers before anything heavy is
imported, and a plug-in writer's declaration is checked before its option is offered."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from retrieval_gate.config import Settings
from retrieval_gate.files.outputs import (
    BUILTIN_OUTPUTS,
    JSON_OUTPUT,
    PLOTS_OUTPUT,
    REPORT_OUTPUT,
    OutputOption,
)
from retrieval_gate.options import OptionValues, resolve_outputs
from retrieval_gate.report import _WRITERS, Targets, _declaration_problem, writers

ROOT = Path("/project")
FOO = OutputOption(name="foo", flag="--rg-foo", help="h", kind="json", ini="retrieval_gate_foo")


def test_the_built_in_writers_declare_the_outputs_plugin_py_offers() -> None:
    built_in = [w for w in writers() if _WRITERS.source_of(w.name).startswith("retrieval_gate.")]
    declared = tuple(output for writer in built_in for output in writer.outputs)
    assert declared == BUILTIN_OUTPUTS
    assert [(o.flag, o.dest, o.ini) for o in BUILTIN_OUTPUTS] == [
        ("--rg-report", "rg_report", "retrieval_gate_report"),
        ("--rg-json", "rg_json", "retrieval_gate_json"),
        ("--rg-plots", "rg_plots", "retrieval_gate_plots"),
    ]


def test_a_declared_output_is_resolved_and_handed_to_its_writer() -> None:
    outputs = (*BUILTIN_OUTPUTS, FOO)
    # Off unless asked for: no default, no twin.
    off = resolve_outputs(OptionValues(rootpath=ROOT, cwd=ROOT, outputs=outputs), Settings(ROOT))
    assert set(off.paths) == {"report", "json"}
    given = OptionValues(
        rootpath=ROOT, cwd=ROOT / "sub", outputs=outputs, paths={"foo": "f.json", "plots": "p"}
    )
    on = resolve_outputs(given, Settings(ROOT))
    assert on.paths["foo"] == ROOT / "sub" / "f.json"  # relative to where pytest started
    assert on.files() == [
        ROOT / "retrieval-gate-report.md",
        ROOT / "retrieval-gate-report.json",
        ROOT / "sub" / "f.json",
    ]  # the plots folder is not a file
    targets = Targets.of(on, {})
    assert targets.path(REPORT_OUTPUT) == ROOT / "retrieval-gate-report.md"
    assert targets.path(JSON_OUTPUT) == ROOT / "retrieval-gate-report.json"
    assert targets.path(PLOTS_OUTPUT) == ROOT / "sub" / "p"
    assert targets.path(FOO) == ROOT / "sub" / "f.json"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"flag": "--foo"}, "its option '--foo' must start with --rg-"),
        ({"flag": "--rg-json", "name": "bar"}, "its option '--rg-json' is already --rg-json's"),
        ({"name": "plots", "flag": "--rg-bar"}, "its name 'plots' is already --rg-plots's"),
        ({"ini": "retrieval_gate_report"}, "its ini key 'retrieval_gate_report' is already"),
        ({"ini": "foo_file"}, "its ini key 'foo_file' must be a retrieval_gate_ key of its own"),
        (
            {"ini": "retrieval_gate_baseline"},
            "its ini key 'retrieval_gate_baseline' must be a retrieval_gate_ key of its own",
        ),
        ({"name": "baseline"}, "its name 'baseline' is the plugin's own"),
        ({"kind": "html"}, "its kind 'html' is not one of markdown, json, plots"),
        ({"setting": "report"}, "it names a [tool.retrieval_gate] key (setting)"),
    ],
)
def test_a_plugin_output_that_would_take_anothers_place_is_refused(
    change: dict[str, str], problem: str
) -> None:
    assert _declaration_problem(FOO, BUILTIN_OUTPUTS) is None
    bad = dataclasses.replace(FOO, **change)  # type: ignore[arg-type]
    found = _declaration_problem(bad, BUILTIN_OUTPUTS)
    assert found is not None and found.startswith(problem)


def test_a_declaration_that_is_not_an_output_option_is_named() -> None:
    assert _declaration_problem("--rg-foo", BUILTIN_OUTPUTS) == (  # type: ignore[arg-type]
        "'--rg-foo' is not an OutputOption (retrieval_gate.files.outputs)"
    )


# A path a plug-in's output takes unasked stays in the rootdir (issue 40): only a path the user
# gives (option, ini key) may point elsewhere.
OUTSIDE = "leaves the rootdir: a default must be a relative path inside it"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"default": "../x.json"}, f"its default '../x.json' {OUTSIDE}"),
        ({"default": "/tmp/x.json"}, f"its default '/tmp/x.json' {OUTSIDE}"),
        ({"default": "out/../../x.json"}, f"its default 'out/../../x.json' {OUTSIDE}"),
        ({"default": "..\\x.json"}, f"its default '..\\\\x.json' {OUTSIDE}"),
        ({"default": "C:\\x.json"}, f"its default 'C:\\\\x.json' {OUTSIDE}"),
    ],
    ids=["parent", "absolute", "parent-inside", "backslash-parent", "drive"],
)
def test_a_plugin_outputs_default_outside_the_rootdir_is_refused(
    change: dict[str, str], problem: str
) -> None:
    bad = dataclasses.replace(FOO, **change)  # type: ignore[arg-type]
    assert _declaration_problem(bad, BUILTIN_OUTPUTS) == problem + (
        " (only a path the user gives may point elsewhere)"
    )
    inside = dataclasses.replace(FOO, default="reports/foo.json")
    assert _declaration_problem(inside, BUILTIN_OUTPUTS) is None


# Hostile declarations (issue 40's new rows): text a terminal shows, names pytest derives from,
# paths resolved from a twin.
@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": "fo\x1bo"}, "its name 'fo\\x1bo' must be lower-case letters, digits and _"),
        ({"flag": "--rg-foo\nbar"}, "its option '--rg-foo\\nbar' must be --rg- then lower-case"),
        (
            {"help": "\x1b[2J\x1b[31mall gates passed"},
            "its help '\\x1b[2J\\x1b[31mall gates passed' must be printable text",
        ),
        ({"help": "h" * 5000}, "its help 'hhhh"),
        ({"metavar": "P\u202eATH"}, "its metavar 'P\\u202eATH' must be printable text"),
        ({"ini": "retrieval_gate_Foo Bar"}, "its ini key 'retrieval_gate_Foo Bar' must be lower"),
        ({"default": "~/x.json"}, f"its default '~/x.json' {OUTSIDE}"),
        ({"default": ""}, "its default '' must be a file name in the rootdir"),
        (
            {"twin_of": "report", "suffix": "/../../../x"},
            "its suffix '/../../../x' must be a plain file suffix",
        ),
        ({"twin_of": "nosuch", "suffix": ".html"}, "its twin_of 'nosuch' names no output"),
        (
            {"twin_of": "report", "suffix": ".html", "default": "x.html"},
            "it gives both a default and twin_of; give one",
        ),
    ],
    ids=[
        "name-escape",
        "flag-newline",
        "help-ansi",
        "help-huge",
        "metavar-bidi",
        "ini-space",
        "default-home",
        "default-empty",
        "suffix-path",
        "twin-of-nothing",
        "default-and-twin",
    ],
)
def test_a_hostile_output_declaration_is_refused_in_one_line(
    change: dict[str, str], problem: str
) -> None:
    bad = dataclasses.replace(FOO, **change)  # type: ignore[arg-type]
    found = _declaration_problem(bad, BUILTIN_OUTPUTS)
    assert found is not None and found.startswith(problem), found
    assert "\n" not in found and "\x1b" not in found and len(found) < 300
    twin = dataclasses.replace(FOO, twin_of="report", suffix=".foo.json")
    assert _declaration_problem(twin, BUILTIN_OUTPUTS) is None


def test_a_twin_resolves_beside_the_output_it_follows() -> None:
    twin = dataclasses.replace(FOO, twin_of="report", suffix=".html")
    values = OptionValues(rootpath=ROOT, cwd=ROOT, outputs=(*BUILTIN_OUTPUTS, twin))
    assert (
        resolve_outputs(values, Settings(ROOT)).paths["foo"] == ROOT / "retrieval-gate-report.html"
    )
