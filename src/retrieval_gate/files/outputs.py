"""Outputs write only what the plugin owns.

The report, its JSON twin, the baseline and the suggested-floors diff are written over whatever
is at their paths, so before anything runs each path is checked (:func:`refusal`): it may be new,
or a file this plugin wrote, recognised by its first bytes (:func:`owned`):

* the markdown report: its first line is ``# Retrieval gate report``;
* the JSON twin and the baseline: a JSON object starting with ``"version": N`` and
  ``"generator": "pytest-retrieval-gate ...``, as every version has written them;
* the floors diff: its first line is :data:`FLOORS_HEADER` (``git apply`` skips it);
* an empty file, which holds nothing to lose.

Refused whether or not they exist: the project's settings and ini files, Python code (``*.py``,
``conftest.py`` would be imported by the next pytest run), anything that is not a regular file
(a folder, a FIFO, ``/dev/full``), and a symbolic link whose target is any of these or is
missing (a link checked into a repository must not steer a write elsewhere). A path is judged by
where it leads, so a link to ``pyproject.toml`` is refused as the settings file.

Each report writer declares the outputs it writes (:class:`OutputOption`: its option, ini key,
default path and kind), so that the plugin offers the option and checks the path without naming
the writer; the built-in writers' declarations are here (:data:`BUILTIN_OUTPUTS`) because
``plugin.py`` registers their options in every pytest session, where only the standard library
may be imported (docs/architecture.md, "Report writers declare their outputs").
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "BUILTIN_OUTPUTS",
    "FLOORS_HEADER",
    "JSON_OUTPUT",
    "PLOTS_OUTPUT",
    "REPORT_OUTPUT",
    "DeclaredKind",
    "OutputKind",
    "OutputOption",
    "owned",
    "refusal",
]

OutputKind = Literal["markdown", "json", "floors"]
#: What a writer's output is: a file of one of the kinds :func:`refusal` recognises, or
#: ``"plots"``, a folder of PNG plots with the plugin's manifest (``options.check_plots_folder``).
DeclaredKind = Literal["markdown", "json", "plots"]


@dataclass(frozen=True)
class OutputOption:
    """One output a report writer writes, as the writer declares it.

    ``name`` keys its path (``Outputs.paths``, ``Targets.extra``) and its ini value; ``flag``
    is its command-line option (``dest`` follows from it, as pytest derives it), ``ini`` its ini
    key (None: none), ``setting`` the ``[tool.retrieval_gate]`` key that sets it (built-ins
    only: the settings table is the plugin's). Its path when none of these is given:
    ``default``, a file in the rootdir; else ``twin_of``'s path with ``suffix`` (the JSON twin
    follows the markdown report); else none, and the output is off. ``kind`` is what an existing
    file at the path must be for the plugin to write over it (:func:`refusal`); ``noun`` names
    it where a message needs more than its flag.
    """

    name: str
    flag: str
    help: str
    kind: DeclaredKind
    metavar: str = "PATH"
    ini: str | None = None
    ini_help: str = ""
    setting: str | None = None
    default: str | None = None
    twin_of: str | None = None
    suffix: str = ""
    noun: str = ""

    @property
    def file_kind(self) -> OutputKind | None:
        """The kind :func:`refusal` checks a file output against; None for a folder."""
        return None if self.kind == "plots" else self.kind

    @property
    def dest(self) -> str:
        """The option's attribute, as pytest derives it from the flag (``--rg-json``:
        ``rg_json``)."""
        return self.flag.lstrip("-").replace("-", "_")


#: The markdown report (report/markdown.py).
REPORT_OUTPUT = OutputOption(
    name="report",
    flag="--rg-report",
    help="markdown report path (default: retrieval-gate-report.md in the rootdir)",
    kind="markdown",
    ini="retrieval_gate_report",
    ini_help="markdown report path",
    setting="report",
    default="retrieval-gate-report.md",
    noun="the markdown report",
)
#: The report's JSON twin (report/json.py).
JSON_OUTPUT = OutputOption(
    name="json",
    flag="--rg-json",
    help="JSON report path (default: the markdown report's path with .json)",
    kind="json",
    ini="retrieval_gate_json",
    ini_help="JSON report path",
    setting="json",
    twin_of="report",
    suffix=".json",
    noun="the JSON twin",
)
#: The PNG plots (report/plots.py): off unless a folder is given.
PLOTS_OUTPUT = OutputOption(
    name="plots",
    flag="--rg-plots",
    help="also write PNG plots into DIR: per suite and metric the systems' values with 95%% "
    "intervals, per run the per-query deltas against the baseline; needs matplotlib "
    "(pytest-retrieval-gate[plots]) (default: no plots)",
    kind="plots",
    metavar="DIR",
    ini="retrieval_gate_plots",
    ini_help="PNG plots folder",
)
#: The built-in writers' outputs, in the order their options are offered; a test checks that
#: they are exactly what the built-in writers declare.
BUILTIN_OUTPUTS: tuple[OutputOption, ...] = (REPORT_OUTPUT, JSON_OUTPUT, PLOTS_OUTPUT)

#: The first line of a ``--rg-suggest-floors`` file: how the next run knows the file is its own.
FLOORS_HEADER = "# suggested floors by pytest-retrieval-gate: review, then git apply this file"

_MARKDOWN_HEADER = "# Retrieval gate report"
_JSON_HEAD = re.compile(
    r'\A\s*\{\s*"version"\s*:\s*\d+\s*,\s*"generator"\s*:\s*"pytest-retrieval-gate[ "]'
)

#: Files a project keeps its settings in (pytest's and this plugin's).
SETTINGS_NAMES = frozenset(
    {
        "pyproject.toml",
        "setup.cfg",
        "tox.ini",
        "pytest.ini",
        ".pytest.ini",
        "retrieval-gate.yaml",
        "retrieval-gate.yml",
    }
)
_CODE_SUFFIXES = frozenset({".py", ".pyi", ".pyw", ".pyx", ".pxd", ".pyc", ".so", ".pyd"})

_WHAT = {
    "markdown": f"a report (first line {_MARKDOWN_HEADER!r})",
    "json": 'a JSON file of this plugin (starting {"version": N, "generator": '
    '"pytest-retrieval-gate ...)',
    "floors": "a floors file of this plugin (first line '# suggested floors by ...')",
}


def _head(path: Path, size: int = 4096) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def owned(path: Path, kind: OutputKind) -> bool:
    """Whether the existing regular file ``path`` is one this plugin wrote as ``kind`` (or is
    empty). Unreadable files are not owned."""
    try:
        head = _head(path)
    except OSError:
        return False
    if not head.strip():
        return True
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if kind == "markdown":
        return text.split("\n", 1)[0].rstrip("\r") == _MARKDOWN_HEADER
    if kind == "json":
        return _JSON_HEAD.match(text) is not None
    return text.split("\n", 1)[0].rstrip("\r") == FLOORS_HEADER


def _kind_of(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def refusal(
    path: Path, kind: OutputKind, *, protected: frozenset[Path] = frozenset()
) -> str | None:
    """Why writing ``kind`` at ``path`` would destroy something of the user's, or None.

    ``protected`` are further files never to write (resolved paths: the settings file in use,
    pytest's ini file). The reason is a sentence fragment for ``"{flag} {path} "``.
    """
    via = ""
    if path.is_symlink():
        target = path.resolve()
        via = f"is a symbolic link to {target}, which "
        if not target.exists():
            return f"{via}does not exist: a link must not steer a write elsewhere; remove it"
        path_for_rules = target
    else:
        path_for_rules = path.resolve()
    name = path_for_rules.name
    if path_for_rules in protected or name in SETTINGS_NAMES:
        return f"{via}is the project's settings: writing there would destroy them"
    if path_for_rules.suffix.lower() in _CODE_SUFFIXES:
        return f"{via}is Python code: writing there would destroy or add a module"
    try:
        mode = path_for_rules.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None  # a new file (one that cannot be made fails the session when written)
    except OSError as exc:
        return f"{via}cannot be checked: {exc.strerror or exc}"
    special = _kind_of(mode)
    if special is not None:
        return f"{via}is {special}, not a regular file"
    if not owned(path_for_rules, kind):
        return (
            f"{via}exists and is not {_WHAT[kind]}: writing there would destroy it; "
            "move it away or choose another path"
        )
    return None
