"""A report writer from outside the package declares its own output option: a project installs a
distribution whose ``retrieval_gate.writers`` entry point names a module with a ``WRITER`` that
declares ``--rg-foo PATH``; with ``--retrieval-gate`` the option is offered, the file is
written there, and the path gets the built-in outputs' protections (docs/architecture.md,
"Report writers declare their outputs"), with no file of the plugin changed.
"""

from __future__ import annotations

import json

import pytest

# Imported before any pytester run (its snapshot of sys.modules would drop them afterwards).
from retrieval_gate.report import _WRITERS, writing

from .conftest import SUITE, lit, write_suite

WRITER = '''
"""A third party's writer: each gate's verdict, as JSON, into --rg-foo PATH."""

import json

from retrieval_gate.files.outputs import OutputOption
from retrieval_gate.report import Writer

FOO = OutputOption(
    name="foo",
    flag="--rg-foo",
    help="each gate's verdict as JSON (default: none)",
    kind="json",
    ini="retrieval_gate_foo",
    ini_help="gate verdicts file",
)


def write(data, targets):
    path = targets.path(FOO)
    if path is None:
        return []
    verdicts = {gate.nodeid.split("::")[-1]: gate.passed for gate in data.gates}
    body = {"version": 1, "generator": "pytest-retrieval-gate toy-writer", "gates": verdicts}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body) + "\\n")
    return [path]


WRITER = Writer(name="foo", write=write, outputs=(FOO,))
'''

DIST_INFO = {
    "METADATA": "Metadata-Version: 2.1\nName: toy-writer\nVersion: 1.0\n",
    "entry_points.txt": "[retrieval_gate.writers]\nfoo = toy_writer\n",
}


@pytest.fixture
def with_writer(project: pytest.Pytester) -> pytest.Pytester:
    write_suite(project, SUITE)
    project.makepyfile(toy_writer=WRITER)
    dist = project.path / "toy_writer-1.0.dist-info"
    dist.mkdir()
    for name, text in DIST_INFO.items():
        (dist / name).write_text(text)
    return project


@pytest.fixture
def fresh_writers(with_writer: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """``with_writer`` for in-process sessions: the writer registry reads its entry points once
    per process, so this test's sessions get an empty one, loaded anew as a fresh process loads
    it (the project's folder, with its dist-info, is on sys.path: ``project``), and this
    process's own comes back afterwards. The outputs' declarations are read by a registry of
    their own at each session's start (``report.plugin_outputs``). One real installed-package
    session in fresh processes stays: test_a_plugin_writer_writes_where_its_own_option_says."""
    for attr, empty in (("_things", {}), ("_sources", {}), ("_dists", {}), ("_builtin", set())):
        monkeypatch.setattr(_WRITERS, attr, empty)
    monkeypatch.setattr(_WRITERS, "_loaded", False)
    return with_writer


def _output(result: pytest.RunResult) -> pytest.LineMatcher:
    """What the user sees, stdout and stderr (a usage error is on stderr)."""
    return pytest.LineMatcher(result.outlines + result.errlines)


def test_a_plugin_writer_writes_where_its_own_option_says(fresh_writers: pytest.Pytester) -> None:
    """Its first two sessions run in fresh processes, as a project that installed the plugin
    and the writer's package has them: the one real installed-package wiring, and under xdist
    the workers, processes of their own, offer the option too. The ini key's session, like this
    file's other tests, loads the entry point anew in this process (``fresh_writers``)."""
    result = fresh_writers.runpytest_subprocess("--retrieval-gate", "--rg-foo", "out/verdicts.json")
    result.assert_outcomes(passed=5)
    assert result.ret == pytest.ExitCode.OK
    target = fresh_writers.path / "out" / "verdicts.json"
    data = json.loads(target.read_text())
    # The suite's five gates (P@1, R@3; the joins category's MRR@3, the hard difficulty's
    # Hit@3; one query's expectation), each passed: the writer got the path its option named.
    assert data["gates"] == dict.fromkeys(
        ["P@1", "R@3", "MRR@3", "Hit@3", "query[customer_names]"], True
    )
    result.stdout.fnmatch_lines([f"*generated retrieval gate report: {target}*"])
    # Its own file from the run before is the plugin's to write over, under xdist too (each
    # worker offers the option as well); the ini key names it too.
    target.write_text('{"version": 1, "generator": "pytest-retrieval-gate toy-writer"}\n')
    again = fresh_writers.runpytest_subprocess(
        "--retrieval-gate", "--rg-foo", "out/verdicts.json", "-n", "2"
    )
    again.assert_outcomes(passed=5)
    assert json.loads(target.read_text()) == data
    settings = fresh_writers.path / "pyproject.toml"
    settings.write_text(
        settings.read_text().replace(
            "[tool.pytest.ini_options]\n",
            '[tool.pytest.ini_options]\nretrieval_gate_foo = "from-ini.json"\n',
        )
    )
    by_ini = fresh_writers.runpytest("--retrieval-gate")
    by_ini.assert_outcomes(passed=5)
    assert json.loads((fresh_writers.path / "from-ini.json").read_text())["version"] == 1


@pytest.mark.parametrize(
    ("target", "refused"),
    [
        ("pyproject.toml", "is the project's settings: writing there would destroy them"),
        ("retrieval-gate-report.md", None),  # the markdown report's own path
        ("lineage.retrieval.yaml", "is a suite file"),
        (".retrieval-gate-cache/x.json", "and the default cache folder"),
    ],
)
def test_a_plugin_writers_path_is_refused_like_the_built_ins(
    fresh_writers: pytest.Pytester, target: str, refused: str | None
) -> None:
    settings = (fresh_writers.path / "pyproject.toml").read_text()
    result = fresh_writers.runpytest(
        "--retrieval-gate", "lineage.retrieval.yaml", "--rg-foo", target
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    path = fresh_writers.path / target
    if refused is None:
        line = f"--rg-report and --rg-foo are both {path}; each output needs its own path"
    else:
        line = f"--rg-foo {path} {refused}"
    _output(result).fnmatch_lines(["*" + lit(line) + "*"])
    assert (fresh_writers.path / "pyproject.toml").read_text() == settings  # nothing written
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)


def test_without_the_gate_a_plugin_writers_option_is_not_offered(
    with_writer: pytest.Pytester,
) -> None:
    # Nothing of the writer's package is imported without --retrieval-gate.
    result = with_writer.runpytest_subprocess("--rg-foo", "out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized arguments: --rg-foo*"])


def test_a_plugin_output_taking_a_built_in_option_is_named(fresh_writers: pytest.Pytester) -> None:
    (fresh_writers.path / "toy_writer.py").write_text(
        WRITER.replace('flag="--rg-foo"', 'flag="--rg-report"')
    )
    result = fresh_writers.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _output(result).fnmatch_lines(
        [
            "*"
            + lit(
                "report writer 'foo' (entry point 'foo' (toy_writer) of group "
                "retrieval_gate.writers, distribution toy-writer 1.0) declares the output 'foo': "
                "its option '--rg-report' is already --rg-report's"
            )
        ]
    )
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)


def test_a_plugin_writer_that_cannot_be_loaded_is_named_before_anything_runs(
    fresh_writers: pytest.Pytester,
) -> None:
    (fresh_writers.path / "toy_writer.py").write_text("raise RuntimeError('half installed')\n")
    result = fresh_writers.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    _output(result).fnmatch_lines(
        [
            "*entry point 'foo' (toy_writer) of group retrieval_gate.writers cannot be loaded: "
            "RuntimeError: half installed*"
        ]
    )
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)


ENTRY = (
    "entry point 'foo' (toy_writer) of group retrieval_gate.writers, distribution toy-writer 1.0"
)


def test_a_plugin_writer_that_fails_fails_the_session_alone_and_the_completion_check(
    fresh_writers: pytest.Pytester,
) -> None:
    """Issue 40: a writer raising in write() ended the session with a raw traceback, and the
    JSON report still said complete and passed, so the completion check passed a crashed
    session. Two runs, each loading the installed entry point anew (``fresh_writers``): plain,
    and -v for its traceback."""
    from retrieval_gate.report.complete import main

    (fresh_writers.path / "toy_writer.py").write_text(
        WRITER.replace(
            "    path = targets.path(FOO)\n", "    raise RuntimeError('quota exceeded')\n"
        )
    )
    result = fresh_writers.runpytest("--retrieval-gate", "--rg-foo", "v.json")
    result.assert_outcomes(passed=5)  # every gate passed: the writer's failure is its own
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = f"report writer 'foo' ({ENTRY}) failed: raised RuntimeError: quota exceeded"
    result.stdout.fnmatch_lines([lit(f"retrieval gate: {line}")])
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)
    # The other writers wrote; the JSON twin, last, says the session did not finish cleanly.
    assert (
        (fresh_writers.path / "retrieval-gate-report.md")
        .read_text()
        .startswith(f"# Retrieval gate report\n\n**Did not finish cleanly**: {line}.")
    )
    report = json.loads((fresh_writers.path / "retrieval-gate-report.json").read_text())
    assert (report["passed"], report["complete"], report["unfinished"]) == (True, False, [line])
    assert main([str(fresh_writers.path / "retrieval-gate-report.json")]) == 1
    verbose = fresh_writers.runpytest("--retrieval-gate", "--rg-foo", "v.json", "-v")
    verbose.stdout.fnmatch_lines(
        [lit(f"retrieval gate: {line}"), "Traceback (most recent call last):", "*toy_writer.py*"]
    )


def test_a_plugin_output_defaulting_outside_the_rootdir_is_refused_before_anything_runs(
    fresh_writers: pytest.Pytester,
) -> None:
    """Issue 40: declared defaults ``../x.json`` or an absolute path were written outside the
    rootdir unasked."""
    (fresh_writers.path / "toy_writer.py").write_text(
        WRITER.replace('ini_help="gate verdicts file",', 'default="../escaped.json",').replace(
            "    if path is None:\n        return []\n", ""
        )
    )
    result = fresh_writers.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = (
        f"ERROR: report writer 'foo' ({ENTRY}) declares the output 'foo': its default "
        "'../escaped.json' leaves the rootdir: a default must be a relative path inside it "
        "(only a path the user gives may point elsewhere)"
    )
    assert [text for text in result.errlines if text.startswith("ERROR")] == [line]
    assert not (fresh_writers.path.parent / "escaped.json").exists()


OTHER_DIST = {
    "METADATA": "Metadata-Version: 2.1\nName: other-writer\nVersion: 2.0\n",
    "entry_points.txt": "[retrieval_gate.writers]\nbar = other_writer\n",
}


@pytest.mark.parametrize("same", ["output", "writer name"])
def test_two_distributions_declaring_one_output_are_both_named(
    fresh_writers: pytest.Pytester, same: str
) -> None:
    """Issue 40: two distributions declaring the same output: one silently replaced the
    other. Either may be loaded first (the order of the installed distributions)."""
    if same == "output":  # another writer, the same --rg-foo
        other = WRITER.replace('Writer(name="foo"', 'Writer(name="bar"')
    else:  # another output, the same writer name
        other = WRITER.replace("foo", "baz").replace('Writer(name="baz"', 'Writer(name="foo"')
    fresh_writers.makepyfile(other_writer=other)
    dist = fresh_writers.path / "other_writer-2.0.dist-info"
    dist.mkdir()
    for name, text in OTHER_DIST.items():
        (dist / name).write_text(text)
    result = fresh_writers.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    bar = "entry point 'bar' (other_writer) of group retrieval_gate.writers, distribution " + (
        "other-writer 2.0"
    )
    if same == "output":
        first, second = (f"report writer 'foo' ({ENTRY})", f"report writer 'bar' ({bar})")
        lines = [
            f"{a} declares the output 'foo': its name 'foo' is already --rg-foo's, declared by {b}"
            for a, b in ((first, second), (second, first))
        ]
    else:
        lines = [
            f"{a}: report writer 'foo' is already registered ({b}); uninstall one of them"
            for a, b in ((ENTRY, bar), (bar, ENTRY))
        ]
    (error,) = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert error.removeprefix("ERROR: ") in lines
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)


PROPERTIES = """
import time

from retrieval_gate.report import Writer, register_writer


def properties(outcome):
    {body}


register_writer(Writer(name="props", item_properties=properties))
"""


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("raise ValueError('no')", "raised ValueError: no"),
        ("time.sleep(5)", "did not return within 0.3 s (it is left running in the background)"),
        ("return {'metric': 1}", "returned dict: a list of at most 1000 (name, value) pairs"),
        ("return [('metric', object())]", "gave property 'metric' a object, not a plain value"),
    ],
    ids=["raises", "hangs", "returns-a-dict", "returns-an-object"],
)
def test_a_plugin_writers_item_properties_fail_alone(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, body: str, reason: str
) -> None:
    """A plug-in writer's JUnit properties of an item are its code too: each gate is still
    decided as it was, the failure is said once, and the session did not finish cleanly."""
    monkeypatch.setattr(writing, "WRITER_TIMEOUT_S", 0.3)
    monkeypatch.setattr(writing, "_FAILED_PROPERTIES", {})
    write_suite(project, SUITE)
    project.makeconftest(PROPERTIES.format(body=body))
    try:
        result = project.runpytest("--retrieval-gate", "--junitxml=junit.xml")
    finally:
        _WRITERS.pop("props", None)
    result.assert_outcomes(passed=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = f"report writer 'props' (register()) (item properties) failed: {reason}"
    said = [text for text in result.outlines if "(item properties)" in text]
    assert said == [f"retrieval gate: {line}"]
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert (report["passed"], report["complete"], report["unfinished"]) == (True, False, [line])
    assert 'name="metric"' in (project.path / "junit.xml").read_text()  # the built-in's
