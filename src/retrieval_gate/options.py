"""Pure resolution of command-line options, ini values and settings into paths and selections.

The session and the ``retrieval_system`` fixture both resolve through here, so they cannot
disagree. Nothing in this module touches pytest: :class:`OptionValues` holds what pytest parsed,
and every function is a plain computation over it (unit-tested in tests/test_options.py).

Path rules, for every output and the cache folder:

* a command-line path is relative to the folder pytest was started in (as with every pytest path);
* an ini path (``retrieval_gate_report`` ...) is relative to the rootdir;
* a ``[tool.retrieval_gate]`` path is relative to the settings file (already resolved in
  :class:`~retrieval_gate.config.Settings`);
* else the default, in the rootdir. ``~`` expands in the first two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from retrieval_gate.baseline.ledger import url_scheme
from retrieval_gate.config import Settings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.files import door
from retrieval_gate.files.outputs import (
    BUILTIN_OUTPUTS,
    JSON_OUTPUT,
    REPORT_OUTPUT,
    OutputKind,
    OutputOption,
    refusal,
)
from retrieval_gate.systems.config import SystemConfig

DEFAULT_BASELINE = "retrieval-baseline.json"
DEFAULT_CACHE_DIR = ".retrieval-gate-cache"


@dataclass(frozen=True)
class OptionValues:
    """What pytest parsed: the ``--rg-*`` values (None when not given) and the ini values
    (empty when not set), plus where pytest runs. ``outputs`` are the report writers' declared
    outputs whose options pytest offered (the built-ins, and those of writers from the
    ``retrieval_gate.writers`` entry-point group); ``paths`` their command-line values by name."""

    rootpath: Path
    cwd: Path
    systems: tuple[str, ...] = ()
    reference: str | None = None
    baseline: str | None = None
    cache_dir: str | None = None
    save_baseline: bool = False
    no_cache: bool = False
    # short name -> value: each output's name (report, json, plots ...), baseline, cache_dir
    ini: Mapping[str, str] = field(default_factory=dict)
    suggest_floors: str | None = None  # --rg-suggest-floors: a file, or "-" for the terminal
    paths: Mapping[str, str | None] = field(default_factory=dict)  # output name -> its option
    outputs: tuple[OutputOption, ...] = BUILTIN_OUTPUTS


@dataclass(frozen=True)
class Outputs:
    """Where the session writes and reads its files."""

    baseline: Path
    cache_dir: Path
    # Each declared output's path by its name (report, json, plots, a plug-in writer's); an
    # output that is off (plots without a folder) has none.
    paths: Mapping[str, Path] = field(default_factory=dict)
    declared: tuple[OutputOption, ...] = BUILTIN_OUTPUTS
    # A baseline store named by URL (``scheme://...``, baseline/ledger.py) rather than a file.
    baseline_url: str | None = None
    # The file --rg-suggest-floors writes (relative to where pytest runs); None for none or "-".
    floors: Path | None = None
    # Where the cache folder's path came from, as messages name it (_cache_origin).
    cache_origin: str = "--rg-cache-dir"

    @property
    def report(self) -> Path:
        return self.paths[REPORT_OUTPUT.name]

    @property
    def json(self) -> Path:
        return self.paths[JSON_OUTPUT.name]

    def written(self) -> list[tuple[OutputOption, Path]]:
        """Each output that is on, with its path, in the order declared."""
        return [(o, self.paths[o.name]) for o in self.declared if o.name in self.paths]

    def files(self) -> list[Path]:
        """The paths of the outputs that are files (not a folder of plots)."""
        return [path for output, path in self.written() if output.file_kind is not None]


def _resolve(
    cli: str | None, ini: str | None, setting: Path | None, default: Path, values: OptionValues
) -> Path:
    if cli:
        path = Path(cli).expanduser()
        return path if path.is_absolute() else values.cwd / path
    if ini:
        path = Path(ini).expanduser()
        return path if path.is_absolute() else values.rootpath / path
    return setting if setting is not None else default


def resolve_cache_dir(values: OptionValues, settings: Settings) -> Path:
    return _resolve(
        values.cache_dir,
        values.ini.get("cache_dir"),
        settings.cache_dir,
        values.rootpath / DEFAULT_CACHE_DIR,
        values,
    )


def _file_path(value: str | None) -> str | None:
    """A ``file://`` URL as the path it names; anything else unchanged."""
    if value and url_scheme(value) == "file":
        return value.partition("://")[2]
    return value


_DEFAULT_CACHE_ORIGIN = "the default cache folder"


def _cache_origin(values: OptionValues, settings: Settings) -> str:
    """Where the cache folder's path came from, in the order resolve_cache_dir reads them: an
    error about the folder names what the user wrote, not an option they never gave."""
    if values.cache_dir:
        return "--rg-cache-dir"
    if values.ini.get("cache_dir"):
        return "the ini option retrieval_gate_cache_dir"
    if settings.cache_dir is not None:
        where = f" in {display_path(settings.source, values.rootpath)}" if settings.source else ""
        return f"the setting cache_dir{where}"
    return _DEFAULT_CACHE_ORIGIN


def resolve_outputs(values: OptionValues, settings: Settings) -> Outputs:
    """Each declared output's path (the JSON twin's default: the report's path with ``.json``),
    the baseline and the cache folder. A twin must differ from the output it follows."""
    paths: dict[str, Path] = {}
    for output in values.outputs:
        given = values.paths.get(output.name)
        ini = values.ini.get(output.name)
        setting = settings.output_paths.get(output.setting) if output.setting else None
        if output.default is not None:
            default: Path | None = values.rootpath / output.default
        elif output.twin_of is not None and output.twin_of in paths:
            default = paths[output.twin_of].with_suffix(output.suffix)
        else:
            default = None
        if default is None and setting is None and not given and not ini:
            continue  # off: nothing asks for it
        fallback = values.rootpath if default is None else default
        paths[output.name] = _resolve(given, ini, setting, fallback, values)
    for output in values.outputs:
        twin = paths.get(output.twin_of or "")
        own = paths.get(output.name)
        if twin is not None and own is not None and own.resolve() == twin.resolve():
            followed = next(o for o in values.outputs if o.name == output.twin_of)
            raise RetrievalGateError(
                f"{output.flag} and {followed.noun} are both {twin}; give {output.noun} its own "
                "path"
            )
    named = values.baseline or values.ini.get("baseline") or settings.baseline_url
    url = named if named and url_scheme(named) not in (None, "file") else None
    baseline = _resolve(
        None if url else _file_path(values.baseline),
        None if url else _file_path(values.ini.get("baseline")),
        settings.baseline,
        values.rootpath / DEFAULT_BASELINE,
        values,
    )
    floors = values.suggest_floors
    return Outputs(
        baseline=baseline,
        cache_dir=resolve_cache_dir(values, settings),
        cache_origin=_cache_origin(values, settings),
        paths=paths,
        declared=values.outputs,
        baseline_url=url,
        floors=_resolve(floors, None, None, values.cwd, values)
        if floors not in (None, "-")
        else None,
    )


def display_path(path: Path, root: Path) -> str:
    """``path`` as messages and reports show it: relative to ``root`` (the rootdir) when inside
    it, ``/``-separated; else as given."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_outputs(
    outputs: Outputs,
    *,
    suite_patterns: Sequence[str] = (),
    suite_files: Iterable[Path] = (),
    corpora: Iterable[Path] = (),
    protected: Iterable[Path | None] = (),
    save_baseline: bool = False,
) -> None:
    """Refuse outputs that would destroy or pollute what the user has, before anything runs.

    An output (each file a report writer declares: the report, its JSON twin, a plug-in writer's;
    the baseline, the ``--rg-suggest-floors`` file) must not be another
    output or the cache folder, a suite file (given on the command line, or named so the suite
    patterns would collect it on the next run), or lie inside a corpus (the next run would read
    it as a document). Paths compare resolved; ``corpora`` may name files or folders. Then each
    output that will be written (the baseline only when ``save_baseline`` and a file) must be new
    or the plugin's own file, and neither settings (``protected``: the settings and ini files in
    use; None ignored), code nor anything but a regular file, also through a symbolic link
    (:func:`retrieval_gate.files.outputs.refusal`).
    """
    # The declared outputs that are files, then the baseline and the floors file.
    files = {o.flag: path.resolve() for o, path in outputs.written() if o.file_kind is not None}
    files["--rg-baseline"] = outputs.baseline.resolve()
    floors = outputs.floors
    if floors is not None:
        files["--rg-suggest-floors"] = floors.resolve()
    cache = outputs.cache_dir.resolve()
    by_default = outputs.cache_origin == _DEFAULT_CACHE_ORIGIN
    cache_named = (
        _DEFAULT_CACHE_ORIGIN if by_default else f"the cache folder ({outputs.cache_origin})"
    )
    if cache.exists() and not cache.is_dir():
        advice = (
            "move the file away, or name a folder with --rg-cache-dir"
            if by_default
            else "name a folder (it is made when missing)"
        )
        raise RetrievalGateError(
            f"{outputs.cache_origin} {outputs.cache_dir} is a file, not a folder: the cache is "
            f"a folder the plugin fills; {advice}"
        )
    seen: dict[Path, str] = {}
    for flag, path in files.items():
        if path in seen:
            raise RetrievalGateError(
                f"{seen[path]} and {flag} are both {path}; each output needs its own path"
            )
        seen[path] = flag
        if _inside(path, cache) or _inside(cache, path):
            raise RetrievalGateError(
                f"{flag} {path} and {cache_named} {cache} overlap; the cache is rebuilt at "
                "will, so keep outputs out of it"
            )
    suites = {p.resolve() for p in suite_files}
    for flag, path in files.items():
        matched = next((pat for pat in suite_patterns if PurePath(path.name).match(pat)), None)
        if path in suites or matched is not None:
            why = "is a suite file" if path in suites else f"matches the suite pattern {matched!r}"
            raise RetrievalGateError(
                f"{flag} {path} {why}: writing there would overwrite or add a suite; choose "
                "another path"
            )
    for corpus in corpora:
        folder = corpus.resolve()
        for flag, path in files.items():
            if _inside(path, folder):
                raise RetrievalGateError(
                    f"{flag} {path} lies inside the corpus {folder}: the next run would read it "
                    "as a document; write it outside the corpus"
                )
    kept = frozenset(p.resolve() for p in protected if p is not None)
    written: list[tuple[str, Path, OutputKind]] = [
        (o.flag, path, kind) for o, path in outputs.written() if (kind := o.file_kind) is not None
    ]
    if save_baseline and outputs.baseline_url is None:
        written.append(("--rg-baseline", outputs.baseline, "json"))
    if floors is not None:
        written.append(("--rg-suggest-floors", floors, "floors"))
    for flag, path, kind in written:
        refused = refusal(path, kind, protected=kept)
        if refused is not None:
            raise RetrievalGateError(f"{flag} {path} {refused}")
    # Through the door (files/door.py): nothing is written out of the project through a
    # symbolic link, folders included; the cache folder too, which every run writes.
    doors = [(flag, path) for flag, path, _ in written]
    doors += [(o.flag, path) for o, path in outputs.written() if o.file_kind is None]
    doors.append((cache_named, outputs.cache_dir))
    for flag, path in doors:
        escaped = door.escape(path)
        if escaped is not None:
            raise RetrievalGateError(f"{flag} {path}: not written: {escaped}")
    for output, path in outputs.written():
        if output.file_kind is None:  # a folder of plots
            check_plots_folder(path, cache, files, corpora)


#: The file a plots folder keeps the names of the plots the plugin wrote in it.
PLOTS_MANIFEST = ".retrieval-gate-plots"


def plots_manifest(folder: Path) -> set[str] | str:
    """The plot files the manifest of ``folder`` names (empty when it has none), or why the file
    by the manifest's name is not one this plugin wrote: the plugin writes it as a regular file
    of UTF-8 lines, each the name of a ``.png`` in the folder, so anything else (a folder, a pipe,
    a link, other text) is the user's, and never read as a list of files the plugin may replace
    or remove."""
    from retrieval_gate.files.read import read_bytes

    manifest = folder / PLOTS_MANIFEST
    if manifest.is_symlink():
        return "it is a symbolic link"
    if not manifest.exists():
        return set()
    try:
        # The guarded read: a pipe or a device is refused without blocking on it.
        data = read_bytes(manifest, what="it")
    except RetrievalGateError as exc:
        return exc.message
    try:
        names = data.decode("utf-8").split()
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    if any("/" in name or not name.endswith(".png") for name in names):
        return "it names files other than plots"
    return set(names)


def check_plots_folder(
    folder: Path, cache: Path, files: Mapping[str, Path], corpora: Iterable[Path]
) -> None:
    """``--rg-plots DIR`` writes PNG files into DIR and replaces the ones it wrote before (named
    in DIR's manifest), so DIR must not hold anything else (a file of the user's would be
    overwritten or mixed in), nor be or overlap the cache folder or a corpus, nor hold another
    output; a symbolic link to nowhere or a path under a file is refused, as the folder could
    not be made there. matplotlib draws them: without it, or with one that fails to import, the
    option is refused before anything runs."""
    import importlib
    import importlib.util

    if folder.is_symlink() and not folder.exists():
        raise RetrievalGateError(
            f"--rg-plots {folder} is a symbolic link to {folder.resolve()}, which does not "
            "exist: a link must not steer a write elsewhere; remove it"
        )
    folder = folder.resolve()
    try:
        existing = next(p for p in (folder, *folder.parents) if p.exists())
    except OSError as exc:
        raise RetrievalGateError(
            f"--rg-plots {folder} cannot be checked: {exc.strerror or exc}"
        ) from None
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"lies under {existing}, a file"
        raise RetrievalGateError(f"--rg-plots {folder} {where}; name a folder")
    if _inside(folder, cache) or _inside(cache, folder):
        raise RetrievalGateError(
            f"--rg-plots {folder} and the cache folder (--rg-cache-dir) {cache} overlap"
        )
    for corpus in corpora:
        if _inside(folder, corpus.resolve()) or _inside(corpus.resolve(), folder):
            raise RetrievalGateError(
                f"--rg-plots {folder} overlaps the corpus {corpus.resolve()}: the next run would "
                "read the plots as documents; write them outside the corpus"
            )
    for flag, path in files.items():
        if _inside(path, folder):
            raise RetrievalGateError(
                f"{flag} {path} lies inside the plots folder (--rg-plots) {folder}; give the "
                "plots a folder of their own"
            )
    if folder.is_dir():
        ours = plots_manifest(folder)
        if isinstance(ours, str):
            raise RetrievalGateError(
                f"--rg-plots {folder} holds {PLOTS_MANIFEST}, which is not the plugin's list of "
                f"the plots it wrote ({ours}); name an empty or new folder"
            )
        try:
            foreign = sorted(p.name for p in folder.iterdir() if p.name != PLOTS_MANIFEST)
        except OSError as exc:
            raise RetrievalGateError(
                f"--rg-plots {folder} cannot be listed: {exc.strerror or exc}"
            ) from None
        # Ours: what the manifest names, and a temporary a killed writer of one of them left.
        foreign = [
            name
            for name in foreign
            if name not in ours and not any(name.startswith(f".{o}.") for o in ours)
        ]
        if foreign:
            shown = ", ".join(foreign[:3]) + (" ..." if len(foreign) > 3 else "")
            raise RetrievalGateError(
                f"--rg-plots {folder} holds files the plugin did not write ({shown}); name an "
                "empty or new folder"
            )
    if importlib.util.find_spec("matplotlib") is None:
        raise RetrievalGateError(
            "--rg-plots needs matplotlib: pip install 'pytest-retrieval-gate[plots]'"
        )
    try:
        # What the plots writer imports, imported now: an installed matplotlib that fails to
        # import (a broken shared library, a numpy it was not built for) is said before the run,
        # not as a traceback once every item has run.
        importlib.import_module("matplotlib.backends.backend_agg")
        importlib.import_module("matplotlib.figure")
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else ""
        raise RetrievalGateError(
            "--rg-plots needs matplotlib, which is installed but could not be imported "
            f"({type(exc).__name__}: {reason}); repair or reinstall it: pip install "
            "--force-reinstall matplotlib"
        ) from None


def select_systems(
    settings: Settings, wanted: Sequence[str], rootpath: Path
) -> tuple[SystemConfig, ...]:
    """The systems to run: those named by ``--rg-system`` (in order, once each), else the
    ``systems`` setting, else every configured system."""
    if not settings.systems:
        where = settings.source or rootpath / "pyproject.toml"
        raise RetrievalGateError(
            "no retrieval systems configured: add [tool.retrieval_gate.system.NAME] to "
            f"pyproject.toml or a 'system' table to retrieval-gate.yaml (looked in {where})"
        )
    names = list(wanted) if wanted else list(settings.default_systems)
    out = []
    for name in dict.fromkeys(names):
        if name not in settings.systems:
            known = ", ".join(sorted(settings.systems))
            raise RetrievalGateError(
                f"--rg-system {name!r}: unknown system; known systems: {known}"
            )
        out.append(settings.systems[name])
    return tuple(out)


def select_reference(
    systems: Sequence[SystemConfig], option: str | None, setting: str | None
) -> str:
    """The system the report compares the others against: the ``--rg-reference`` option, else
    the ``reference`` setting, else the first system. An option naming a system the session
    does not run is an error; a setting naming one is not (``--rg-system`` chose the systems of
    this session, and the settings' reference is simply not among them): the first system is the
    reference then."""
    running = [s.name for s in systems]
    if option is not None:
        if option not in running:
            raise RetrievalGateError(
                f"--rg-reference: reference system {option!r} is not among the systems this "
                f"session runs ({', '.join(running)})"
            )
        return option
    return setting if setting in running else running[0]
