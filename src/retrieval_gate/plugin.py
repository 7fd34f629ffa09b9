"""pytest11 entry point: options, configure, file collection.

Loaded in every pytest session, with or without ``--retrieval-gate``: it imports nothing but pytest,
the standard library and the report writers' output declarations (files/outputs.py, itself
standard library only), whose options it offers. Everything else (numpy, yaml, the suite and run
machinery) is imported in ``pytest_configure`` only when the flag is on.
"""

from __future__ import annotations

import argparse
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from retrieval_gate.files.outputs import BUILTIN_OUTPUTS, OutputOption
from retrieval_gate.keys import SESSION_KEY

if TYPE_CHECKING:
    from retrieval_gate.options import OptionValues

DEFAULT_FILES = ("*.retrieval.yaml", "*.retrieval.yml", "*.retrieval.json")
SUITE_SUFFIXES = (".yaml", ".yml", ".json")


#: Options only the gate reads: given without ``--retrieval-gate`` they would be silently ignored.
#: (``--rg-system``, ``--rg-cache-dir`` and ``--rg-no-cache`` also steer the ``retrieval_system``
#: fixture, which works without the gate.)
#: The report writers' outputs (files/outputs.py) are offered where --help has always listed
#: them: those every session writes (the report, its twin) after --rg-save-baseline, those that
#: are off until asked for (--rg-plots) after --rg-plan.
WRITTEN_OUTPUTS = tuple(o for o in BUILTIN_OUTPUTS if o.default or o.twin_of)
OPTIONAL_OUTPUTS = tuple(o for o in BUILTIN_OUTPUTS if o not in WRITTEN_OUTPUTS)
GATE_ONLY_OPTIONS: dict[str, str] = {
    "rg_reference": "--rg-reference",
    "rg_baseline": "--rg-baseline",
    "rg_save_baseline": "--rg-save-baseline",
    **{output.dest: output.flag for output in WRITTEN_OUTPUTS},
    "rg_suggest_floors": "--rg-suggest-floors",
    "rg_plan": "--rg-plan",
    **{output.dest: output.flag for output in OPTIONAL_OUTPUTS},
    "rg_record": "--rg-record",
    "rg_pin": "--rg-pin",
    "rg_base": "--rg-base",
}

#: The outputs of the writers from the ``retrieval_gate.writers`` entry-point group whose options
#: this session offers (``pytest_load_initial_conftests``).
PLUGIN_OUTPUTS = pytest.StashKey[tuple[OutputOption, ...]]()


def gate_only_given(given: dict[str, object]) -> list[str]:
    """The gate-only options set in ``given`` (dest -> parsed value), as spelled on the command
    line; a usage error when ``--retrieval-gate`` is off."""
    return [flag for dest, flag in GATE_ONLY_OPTIONS.items() if given.get(dest)]


def _refused(what: str, value: str, advice: str) -> argparse.ArgumentTypeError:
    """A bad option value's usage error (pytest prints ``argument --rg-...: MESSAGE``): the value
    quoted as display shows it, a key given by mistake masked and control characters escaped."""
    from retrieval_gate.display import shown

    return argparse.ArgumentTypeError(shown(f"invalid {what} {value!r}: {advice}"))


def _system_name(value: str) -> str:
    if not value or not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise _refused("system name", value, "use letters, digits, '-', '_' or '.'")
    return value


def _path_value(value: str) -> str:
    if not value.strip():
        raise _refused("path", value, "must not be empty")
    return value


def _ref_value(value: str) -> str:
    # Passed to git as a revision (baseline/provenance.py): never a word git could read as an
    # option, nor a control character or space, which no tag, branch or commit holds.
    if (
        not value
        or len(value) > 255
        or value.startswith("-")
        or any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in value)
    ):
        raise _refused(
            "ref",
            value,
            "give a tag, a branch or a commit (a name without spaces or a leading '-')",
        )
    return value


def _base_value(value: str) -> str:
    # Read with git show REF:path (baseline/base.py): never an option (a leading -), nor a path
    # into the tree itself (REF:path), nor what no branch, tag or commit is spelled with.
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./@{}^~+-")
    if not value or value.startswith("-") or ":" in value or not set(value) <= allowed:
        raise _refused("ref", value, "give a branch, tag or commit git knows (origin/main)")
    if len(value) > 256 or ".." in value.split("/"):
        raise _refused("ref", value, "give a branch, tag or commit git knows (origin/main)")
    return value


def _floors_target(value: str) -> str:
    # The diff must never land on a suite file: it only ever proposes changes to them.
    if value != "-" and Path(value).suffix.lower() in SUITE_SUFFIXES:
        raise _refused(
            "path",
            value,
            f"a {Path(value).suffix} file could be a suite; write the diff to a .diff file, or "
            "'-' for the terminal",
        )
    return _path_value(value)


#: The ini keys of the paths that are not a report writer's output (those declare their own).
INI_NAMES = {
    "baseline": "retrieval_gate_baseline",
    "cache_dir": "retrieval_gate_cache_dir",
}


def option_values(config: pytest.Config) -> OptionValues:
    """What pytest parsed, for the pure resolution in options.py (options.py itself knows
    nothing of pytest)."""
    from retrieval_gate.options import OptionValues

    outputs = BUILTIN_OUTPUTS + config.stash.get(PLUGIN_OUTPUTS, ())
    ini = {short: str(config.getini(name) or "") for short, name in INI_NAMES.items()}
    ini.update({o.name: str(config.getini(o.ini) or "") for o in outputs if o.ini})
    return OptionValues(
        rootpath=config.rootpath,
        cwd=Path.cwd(),
        systems=tuple(config.getoption("rg_system") or ()),
        reference=config.getoption("rg_reference"),
        baseline=config.getoption("rg_baseline"),
        cache_dir=config.getoption("rg_cache_dir"),
        save_baseline=bool(config.getoption("rg_save_baseline")),
        no_cache=bool(config.getoption("rg_no_cache")),
        ini=ini,
        suggest_floors=config.getoption("rg_suggest_floors", None),
        paths={o.name: config.getoption(o.dest, None) for o in outputs},
        outputs=outputs,
    )


def _add_option(group: Any, output: OutputOption) -> None:
    """Offer a report writer's output on the command line, as it declares it."""
    group.addoption(output.flag, metavar=output.metavar, type=_path_value, help=output.help)


def _add_ini(parser: pytest.Parser, output: OutputOption) -> None:
    if output.ini:
        parser.addini(output.ini, type="string", default="", help=output.ini_help)


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """With ``--retrieval-gate``, offer the outputs of the writers installed through the
    ``retrieval_gate.writers`` entry-point group: pytest has read ``--retrieval-gate`` by now
    (``known_args_namespace``) but not yet the other options. Without the flag nothing is
    loaded, so such an option is unknown then."""
    if not getattr(early_config.known_args_namespace, "retrieval_gate", False):
        return
    from retrieval_gate.display import shown
    from retrieval_gate.report import plugin_outputs
    from retrieval_gate.usercode import PluginLoadError

    try:
        found = plugin_outputs(BUILTIN_OUTPUTS)
    except PluginLoadError as exc:
        raise pytest.UsageError(shown(exc.message)) from None
    group = parser.getgroup("retrieval gate")
    for output, source in found:
        try:
            _add_option(group, output)
            _add_ini(parser, output)
        except ValueError as exc:  # an option or ini key another plugin already took
            raise pytest.UsageError(
                shown(
                    f"{source} declares the output option {output.flag}, which cannot be "
                    f"offered: {exc}"
                )
            ) from None
    early_config.stash[PLUGIN_OUTPUTS] = tuple(output for output, _ in found)


def named_files(config: pytest.Config) -> list[Path]:
    """Files named on the command line (``path::node`` ids included), as pytest resolves them."""
    base = config.invocation_params.dir
    return [path for arg in config.args if (path := base / arg.split("::")[0]).is_file()]


def progress_writer(config: pytest.Config) -> Any:
    """Writes a progress line around pytest's capture (runs happen inside items): one rewritten
    line in a terminal, plain lines in a log."""
    from contextlib import nullcontext

    def write(line: str, final: bool) -> None:
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        capman = config.pluginmanager.get_plugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman is not None else nullcontext():
            if tr.isatty:
                tr.rewrite(line, erase=True)
                if final:
                    tr.write("\n")
            else:
                # A log: the line goes between a file's result characters, and pytest resumes
                # them on the next line, neither naming the file again nor leaving a "." alone
                # on a line (pytest's write_line would end the file's line for good).
                if tr._tw.width_of_current_line:  # mid-line: the file's name, its results
                    tr.write("\n")
                if tr.showlongtestinfo:
                    # -v: left open; pytest ends it before the item's name and verdict (no blank
                    # line), as anything else it writes does (a current path other than theirs).
                    tr.write(line)
                    tr.currentfspath = line
                else:
                    tr.write(line + "\n")

    return write


#: The thread pools numpy's BLAS and torch size themselves by, read when they load.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def share_cores(config: pytest.Config) -> int | None:
    """In an xdist worker, size the numeric thread pools to this worker's share of the cores
    (cores // workers, at least 1) unless the user sized them: torch and BLAS each start one
    thread per core by default, so N workers would run N x cores threads that slow each other
    down (on 2 cores, -n 2 would be slower than a serial run even without a repeated run).
    Returns the threads given, None where nothing was changed."""
    import os
    import sys

    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or any(os.environ.get(v) for v in THREAD_VARIABLES):
        return None
    workers = max(1, int(workerinput.get("workercount", 1)))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = max(1, (cores or 1) // workers)
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:  # already loaded (by a conftest): it read the variables before
        torch.set_num_threads(threads)
    return threads


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("retrieval gate", "retrieval quality gates (pytest-retrieval-gate)")
    group.addoption(
        "--retrieval-gate",
        action="store_true",
        help="collect retrieval suites and gate on their metrics (default: off)",
    )
    group.addoption(
        "--rg-system",
        action="append",
        metavar="NAME",
        type=_system_name,
        help="run this configured system; repeatable (default: the 'systems' setting, else all)",
    )
    group.addoption(
        "--rg-reference",
        metavar="NAME",
        type=_system_name,
        help="system the report compares the others against "
        "(default: 'reference' setting, else the first system)",
    )
    group.addoption(
        "--rg-baseline",
        metavar="PATH",
        type=_path_value,
        help="baseline file to compare against (default: 'baseline' setting, "
        "else retrieval-baseline.json)",
    )
    group.addoption(
        "--rg-save-baseline",
        action="store_true",
        help="write this run's results as the accepted baseline (default: off)",
    )
    for output in WRITTEN_OUTPUTS:
        _add_option(group, output)
    group.addoption(
        "--rg-suggest-floors",
        metavar="PATH",
        type=_floors_target,
        help="write floors from the baseline's lower 95%% bounds as a diff of the suite files "
        "to PATH ('-': the terminal); never changes a suite (default: off)",
    )
    group.addoption(
        "--rg-plan",
        action="store_true",
        help="print each suite's regression resolution and the queries a tolerance needs, from "
        "the baseline, and run nothing (default: off)",
    )
    for output in OPTIONAL_OUTPUTS:
        _add_option(group, output)
    group.addoption(
        "--rg-record",
        action="store_true",
        help="append this run to the history of quality without saving a baseline, as on the "
        "main branch (docs/baselines.md) (default: only runs that save a baseline)",
    )
    group.addoption(
        "--rg-pin",
        metavar="REF",
        type=_ref_value,
        help="compare slow drift with the history's record at REF (a tag, branch or commit git "
        "resolves: a release), or at its newest recorded ancestor, instead of the oldest record "
        "in the drift window (default: the window)",
    )
    group.addoption(
        "--rg-base",
        metavar="REF",
        type=_base_value,
        help="the pull request's target branch (a branch, tag or commit git has, such as "
        "origin/main): name what the baseline accepts against its baseline, and record it when "
        "saving (default: origin/$GITHUB_BASE_REF in a GitHub pull-request run, else none)",
    )
    group.addoption(
        "--rg-no-cache",
        action="store_true",
        help="embed and index from scratch, ignoring and not writing the cache (default: off)",
    )
    group.addoption(
        "--rg-cache-dir",
        metavar="PATH",
        type=_path_value,
        help="embedding and index cache folder (default: .retrieval-gate-cache in the rootdir)",
    )
    parser.addini(
        "retrieval_gate_files",
        type="args",
        default=list(DEFAULT_FILES),
        help="glob patterns of retrieval suite files (default: " + " ".join(DEFAULT_FILES) + ")",
    )
    for output in WRITTEN_OUTPUTS:
        _add_ini(parser, output)
    parser.addini("retrieval_gate_baseline", type="string", default="", help="baseline path")
    parser.addini("retrieval_gate_cache_dir", type="string", default="", help="cache folder")
    for output in OPTIONAL_OUTPUTS:
        _add_ini(parser, output)


def _warn_ignored_settings(config: pytest.Config, session: Any) -> None:
    """Said once, in the summary (not per xdist worker): a settings table the gate does not read,
    where an edit would change nothing."""
    from retrieval_gate.config import ignored_settings

    if session.is_worker or (ignored := ignored_settings(config.rootpath)) is None:
        return
    source = session.settings.source.name
    session.closing_lines.append(
        f"retrieval gate: warning: {source} holds the settings; the [tool.retrieval_gate] table "
        f"in {ignored.name} is not read (move what it needs into {source} and delete the table)"
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("retrieval_gate", False):
        given = gate_only_given({dest: config.getoption(dest, None) for dest in GATE_ONLY_OPTIONS})
        if given:
            raise pytest.UsageError(
                f"{', '.join(given)} only take effect with --retrieval-gate; add --retrieval-gate "
                "or drop them"
            )
        return
    config.addinivalue_line(
        "markers",
        "retrieval_gate: an item generated from a retrieval suite (pytest-retrieval-gate)",
    )
    config.addinivalue_line("markers", "xdist_group(name): run items of one group on one worker")
    _check_plan_options(config)
    share_cores(config)  # before anything loads torch or numpy's BLAS in an xdist worker
    from retrieval_gate.collect import group_runs_on_workers

    group_runs_on_workers(config)
    from retrieval_gate.baseline.entry import use_metric_bounds
    from retrieval_gate.errors import RetrievalGateError
    from retrieval_gate.metrics.registry import bounds_by_name, format_bounds
    from retrieval_gate.session import GateSession

    use_metric_bounds(bounds_by_name, format_bounds)  # a hand-edited P@10 of 5.0 is refused
    session = None
    try:
        session = GateSession(
            config,
            option_values(config),
            suite_files=named_files(config),
            write_progress=progress_writer(config),
        )
        # Reads the settings files again, under the size limit the session just installed: a
        # settings file over its own max_file_mb is refused here, as a usage error.
        _warn_ignored_settings(config, session)
    except RetrievalGateError as exc:
        from retrieval_gate.display import shown
        from retrieval_gate.files import door, lock, read

        if session is not None:
            session.close()
        read.configure(None)  # the session's size limit, set before it was refused
        door.configure(None)  # and its rootdir and lock timeout
        lock.configure(None)
        raise pytest.UsageError(shown(exc.format())) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "retrieval_gate_session")
    from retrieval_gate.report.selection import PLUGIN_NAME, Selection

    config.pluginmanager.register(Selection(config), PLUGIN_NAME)
    config.pluginmanager.register(ShownWarnings(), "retrieval_gate_warnings")
    from retrieval_gate.report import channels

    config.pluginmanager.register(channels.HeldOutChannels(config), channels.PLUGIN_NAME)
    if config.getoption("xmlpath", None):
        from retrieval_gate.report.junit import JunitNames

        age = session.history.age_properties(session.baseline)
        collected = session.history.accepting.properties  # read once every item ran

        def accepted() -> list[tuple[str, object]]:
            return collected(session.collected.runs, session.collected.gates)

        config.pluginmanager.register(JunitNames(config, age, accepted), "retrieval_gate_junit")


class ShownWarnings:
    """Every warning of a gate session shown as display shows any text before pytest's warnings
    summary prints it as it is (and before xdist sends it from a worker): a retriever's or a
    library's ``warnings.warn`` quoting a key, a URL or a document with control characters in
    it, and the source line pytest prints under it. (The plugin's own warnings are shown when
    made: errors.GateWarning.)"""

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self, warning_message: Any) -> None:
        import linecache

        from retrieval_gate.display import shown

        if warning_message.line is None and warning_message.filename:
            line = linecache.getline(warning_message.filename, warning_message.lineno or 0)
            warning_message.line = shown(line.strip())
        message = warning_message.message
        if isinstance(message, Warning):
            text = str(message)
            inert = shown(text, multiline=True)
            if inert != text:
                message.args = (inert,)
        elif isinstance(message, str):
            warning_message.message = shown(message, multiline=True)


def _check_plan_options(config: pytest.Config) -> None:
    if not config.getoption("rg_plan", False):
        return
    # Each of these acts on the session's runs: under --rg-plan it would silently do nothing.
    for dest, flag, what in (
        ("rg_save_baseline", "--rg-save-baseline", "no run to save"),
        ("rg_suggest_floors", "--rg-suggest-floors", "no run to suggest floors from"),
        ("rg_plots", "--rg-plots", "no run to plot"),
        ("rg_record", "--rg-record", "no run to record"),
    ):
        if config.getoption(dest, None):
            raise pytest.UsageError(f"--rg-plan runs nothing, so there is {what}: drop {flag}")
    if config.getoption("numprocesses", None):
        # Under xdist only the workers collect, and the plan is made while collecting.
        raise pytest.UsageError("--rg-plan collects in this process: add -n 0 (or drop -n)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SESSION_KEY in config.stash and config.getoption("rg_plan", False) and items:
        # Planning reads the baseline and the suites only: every item is deselected.
        config.hook.pytest_deselected(items=list(items))
        items.clear()


def pytest_collection_finish(session: pytest.Session) -> None:
    if SESSION_KEY in session.config.stash:
        from retrieval_gate.collect import check_decision_suites

        check_decision_suites(session)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    planned = SESSION_KEY in session.config.stash and session.config.getoption("rg_plan", False)
    if planned and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK  # a plan that ran nothing did what it was asked


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if SESSION_KEY not in config.stash:
        return
    if not config.getoption("rg_plan", False):
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not config.getoption("collectonly"):
            from retrieval_gate.report.selection import PLUGIN_NAME, Selection

            selection = config.pluginmanager.get_plugin(PLUGIN_NAME)
            if isinstance(selection, Selection):
                from retrieval_gate.display import shown

                reason = selection.why_nothing_ran(config.getini("retrieval_gate_files"))
                terminalreporter.write_line(shown(f"retrieval gate: nothing ran: {reason}"))
        return
    from retrieval_gate.display import shown
    from retrieval_gate.report.terminal import render_plan

    session = config.stash[SESSION_KEY]
    terminalreporter.write_sep("=", "retrieval gate plan")
    plan = session.plan
    for line in render_plan(
        plan.rows(),
        plan.blocks,
        session.settings.alpha,
        baseline=None if session.baseline is None else session.where,
        unplanned=plan.without_baseline,
    ):
        terminalreporter.write_line(shown(line))


@pytest.fixture(scope="session")
def retrieval_system(request: pytest.FixtureRequest) -> Any:
    """The configured retrieval system, opened once per session: ``search(query, k)`` returns
    ``[(doc_id, score), ...]`` best first, exactly as the gate retrieves.

    Which system: the first ``--rg-system``, else the first of the ``systems`` setting. Works
    with or without ``--retrieval-gate``; its corpus embeddings come from the same cache.
    """
    from retrieval_gate.errors import RetrievalGateError
    from retrieval_gate.runs.handle import RetrievalSystem, open_system

    config = request.config
    session = config.stash.get(SESSION_KEY, None)
    failure: str | None = None
    try:
        if session is not None:
            opened = RetrievalSystem(session.systems[0], session.settings, session.run_options)
        else:
            from retrieval_gate.config import load_settings
            from retrieval_gate.options import resolve_cache_dir, select_systems

            # Resolved exactly as the gate resolves them (options.py).
            values = option_values(config)
            settings = load_settings(config.rootpath)
            chosen = select_systems(settings, values.systems[:1], config.rootpath)[0]
            opened = open_system(
                config.rootpath,
                name=chosen.name,
                cache_dir=resolve_cache_dir(values, settings),
                use_cache=not values.no_cache,
            )
    except RetrievalGateError as exc:
        from retrieval_gate.display import shown

        failure = f"retrieval_system: {shown(exc.format())}"
    if failure is not None:
        # Outside the except block: raised inside it, pytest would print the setting's error
        # twice, joined by "During handling of the above exception, another exception occurred".
        pytest.fail(failure, pytrace=False)
    request.addfinalizer(opened.close)
    return opened


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        from retrieval_gate.display import forget_secrets, unseal_held_out
        from retrieval_gate.files import door, lock, read

        session.close()
        read.configure(None)  # the settings' max_file_mb, which the session installed
        door.configure(None)  # its rootdir and lock_timeout too
        lock.configure(None)
        forget_secrets()  # the session's settings registered them; a later session, its own
        unseal_held_out()  # so did its suites' holdouts
        config.pluginmanager.unregister(session)
        del config.stash[SESSION_KEY]
    for name in (
        "retrieval_gate_junit",
        "retrieval_gate_selection",
        "retrieval_gate_run_grouping",
        "retrieval_gate_channels",
    ):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            close = getattr(plugin, "close", None)
            if close is not None:
                close()
            config.pluginmanager.unregister(plugin)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if SESSION_KEY not in parent.config.stash:
        return None
    if not _is_suite(file_path, parent):
        return None
    from retrieval_gate.collect import SuiteFile

    return SuiteFile.from_parent(parent, path=file_path)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A folder's suites that pytest passes over without a word: pytest hands only regular
    files and folders to ``pytest_collect_file``, so a suite path that is a named pipe, a
    socket, a device, a link to nowhere or a loop of links would vanish and the gate pass. They
    are collected as suites, and reading them says what they are (files/read.py)."""
    report = yield
    if (
        SESSION_KEY in collector.config.stash
        and isinstance(collector, pytest.Directory)
        and report.passed
        and isinstance(report.result, list)
    ):
        from retrieval_gate.collect import SuiteFile

        for path in _unlisted_suites(collector):
            report.result.append(SuiteFile.from_parent(collector, path=path))
    return report


def _unlisted_suites(folder: pytest.Directory) -> list[Path]:
    """The entries of ``folder`` named like a suite that are neither a regular file nor a
    folder (followed through links), and that no ``--ignore`` or ``conftest`` leaves out."""
    import os

    try:
        entries = sorted(os.scandir(folder.path), key=lambda e: e.name)
    except OSError:
        return []  # pytest's own listing of the folder says why
    found = []
    for entry in entries:
        try:
            listed = entry.is_file() or entry.is_dir()
        except OSError:  # a loop of links: is_file() itself cannot tell
            listed = False
        path = Path(entry.path)
        if listed or not _is_suite(path, folder):
            continue
        if not folder.ihook.pytest_ignore_collect(collection_path=path, config=folder.config):
            found.append(path)
    return found


def _is_suite(file_path: Path, parent: pytest.Collector) -> bool:
    if file_path.suffix.lower() not in SUITE_SUFFIXES:
        return False
    if parent.session.isinitpath(file_path):
        return True  # named on the command line: a suite whatever its name
    patterns: list[str] = parent.config.getini("retrieval_gate_files")
    return any(file_path.match(pattern) for pattern in patterns)
