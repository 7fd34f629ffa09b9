"""Pure resolution of options, ini values and settings (options.py), which the session and the
``retrieval_system`` fixture share."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_gate.config import Settings
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.options import (
    PLOTS_MANIFEST,
    OptionValues,
    check_plots_folder,
    plots_manifest,
    resolve_cache_dir,
    resolve_outputs,
    select_reference,
    select_systems,
)
from retrieval_gate.plugin import GATE_ONLY_OPTIONS, gate_only_given
from retrieval_gate.systems.config import SystemConfig

ROOT = Path("/project")
CWD = Path("/project/sub")
A, B, C = (SystemConfig(name=n, kind="retriever", options={"retriever": f"app:{n}"}) for n in "abc")


def settings(**kwargs: object) -> Settings:
    return Settings(root=ROOT, **kwargs)  # type: ignore[arg-type]


def values(**kwargs: object) -> OptionValues:
    return OptionValues(rootpath=ROOT, cwd=CWD, **kwargs)  # type: ignore[arg-type]


def test_defaults_live_in_the_rootdir() -> None:
    got = resolve_outputs(values(), settings())
    assert got.report == ROOT / "retrieval-gate-report.md"
    assert got.json == ROOT / "retrieval-gate-report.json"
    assert got.baseline == ROOT / "retrieval-baseline.json"
    assert got.cache_dir == ROOT / ".retrieval-gate-cache"


def test_command_line_paths_are_relative_to_where_pytest_started() -> None:
    got = resolve_outputs(
        values(paths={"report": "out/r.md"}, baseline="b.json", cache_dir="cache"), settings()
    )
    assert got.report == CWD / "out/r.md"
    assert got.json == CWD / "out/r.json"  # the twin follows the report
    assert got.baseline == CWD / "b.json"
    assert got.cache_dir == CWD / "cache"


def test_ini_paths_are_relative_to_the_rootdir_and_lose_to_the_command_line() -> None:
    ini = {"report": "ini.md", "json": "ini.json", "baseline": "ini-b.json", "cache_dir": "c"}
    got = resolve_outputs(values(ini=ini), settings())
    assert (got.report, got.json, got.baseline, got.cache_dir) == (
        ROOT / "ini.md",
        ROOT / "ini.json",
        ROOT / "ini-b.json",
        ROOT / "c",
    )
    assert (
        resolve_outputs(values(ini=ini, paths={"report": "cli.md"}), settings()).report
        == CWD / "cli.md"
    )


def test_settings_paths_come_after_ini_and_before_defaults() -> None:
    configured = settings(report=Path("/elsewhere/r.md"), cache_dir=Path("/elsewhere/cache"))
    got = resolve_outputs(values(), configured)
    assert got.report == Path("/elsewhere/r.md")
    assert got.json == Path("/elsewhere/r.json")
    assert resolve_cache_dir(values(), configured) == Path("/elsewhere/cache")
    assert resolve_cache_dir(values(ini={"cache_dir": "x"}), configured) == ROOT / "x"


def test_the_cache_folder_is_named_by_where_its_path_came_from() -> None:
    configured = settings(cache_dir=Path("/project/c"), source=ROOT / "pyproject.toml")

    def origin(given: OptionValues, from_settings: Settings) -> str:
        return resolve_outputs(given, from_settings).cache_origin

    assert origin(values(), settings()) == "the default cache folder"
    assert origin(values(), configured) == "the setting cache_dir in pyproject.toml"
    assert origin(values(ini={"cache_dir": "c"}), configured) == (
        "the ini option retrieval_gate_cache_dir"
    )
    assert origin(values(ini={"cache_dir": "c"}, cache_dir="c"), configured) == "--rg-cache-dir"


def test_absolute_and_home_paths() -> None:
    got = resolve_outputs(values(paths={"report": "/tmp/r.md", "json": "~/r.json"}), settings())
    assert got.report == Path("/tmp/r.md")
    assert got.json == Path.home() / "r.json"


def test_json_twin_equal_to_the_report_is_refused() -> None:
    with pytest.raises(RetrievalGateError, match="give the JSON twin its own path"):
        resolve_outputs(values(paths={"report": "r.md", "json": "r.md"}), settings())


def test_systems_from_the_option_in_order_once_each() -> None:
    configured = settings(systems={"a": A, "b": B, "c": C}, default_systems=("a",))
    assert select_systems(configured, ("c", "a", "c"), ROOT) == (C, A)
    assert select_systems(configured, (), ROOT) == (A,)


def test_unknown_system_lists_the_known_ones() -> None:
    configured = settings(systems={"a": A, "b": B}, default_systems=("a", "b"))
    with pytest.raises(
        RetrievalGateError, match=r"--rg-system 'x': unknown system; known systems: a, b"
    ):
        select_systems(configured, ("x",), ROOT)


def test_no_systems_says_where_it_looked() -> None:
    with pytest.raises(RetrievalGateError, match=r"looked in /project/pyproject.toml"):
        select_systems(settings(), (), ROOT)


def test_reference_option_setting_or_first() -> None:
    assert select_reference((A, B), None, None) == "a"
    assert select_reference((A, B), None, "b") == "b"
    assert select_reference((A, B), "a", "b") == "a"
    with pytest.raises(RetrievalGateError, match=r"reference system 'c' is not among .* \(a, b\)"):
        select_reference((A, B), "c", None)


def test_reference_setting_of_a_system_not_running_falls_back_to_the_first() -> None:
    # `--rg-system b` while the settings say `reference = "a"`: the README's own example.
    assert select_reference((B,), None, "a") == "b"
    with pytest.raises(RetrievalGateError, match=r"--rg-reference: reference system 'a'"):
        select_reference((B,), "a", "a")


def test_gate_only_options_are_named_as_typed() -> None:
    assert gate_only_given(
        {"rg_report": "r.md", "rg_system": ["a"], "rg_save_baseline": False}
    ) == ["--rg-report"]
    assert gate_only_given({dest: True for dest in GATE_ONLY_OPTIONS}) == list(
        GATE_ONLY_OPTIONS.values()
    )


def _matplotlib(monkeypatch: pytest.MonkeyPatch, *, installed: bool) -> None:
    """As where the plots extra is (or is not) installed: only whether matplotlib is there is
    asked, never imported."""
    import importlib.util

    real = importlib.util.find_spec
    found = object() if installed else None
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: found if name == "matplotlib" else real(name, *a),
    )


def test_a_plots_folder_without_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _matplotlib(monkeypatch, installed=False)
    with pytest.raises(RetrievalGateError, match=r"--rg-plots needs matplotlib: pip install"):
        check_plots_folder(tmp_path / "plots", tmp_path / "cache", {}, ())
    # The folder's own problems come first: the same line with or without the extra.
    (tmp_path / "pyproject.toml").write_text("[tool.x]\n")
    with pytest.raises(RetrievalGateError, match=r"pyproject.toml is a file; name a folder"):
        check_plots_folder(tmp_path / "pyproject.toml", tmp_path / "cache", {}, ())


def test_a_plots_folder_of_the_plugins_own_plots_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _matplotlib(monkeypatch, installed=True)
    folder = tmp_path / "plots"
    folder.mkdir()
    (folder / PLOTS_MANIFEST).write_text("s--P@1.png\n")
    (folder / "s--P@1.png").write_bytes(b"\x89PNG")
    (folder / ".s--P@1.png.123.tmp").write_bytes(b"")  # a killed writer's temporary
    assert plots_manifest(folder) == {"s--P@1.png"}
    check_plots_folder(folder, tmp_path / "cache", {}, ())


def test_a_manifest_the_plugin_did_not_write_is_never_read_as_its_list(tmp_path: Path) -> None:
    # The plugin writes its manifest as a regular file of .png names: anything else is the
    # user's, and the reason says what it is instead.
    folder = tmp_path / "plots"
    folder.mkdir()
    assert plots_manifest(folder) == set()
    (tmp_path / "list").write_text("s--P@1.png\n")
    (folder / PLOTS_MANIFEST).symlink_to(tmp_path / "list")
    assert plots_manifest(folder) == "it is a symbolic link"
    (folder / PLOTS_MANIFEST).unlink()
    (folder / PLOTS_MANIFEST).mkdir()
    assert plots_manifest(folder) == "it is a folder, not a regular file"
    (folder / PLOTS_MANIFEST).rmdir()
    (folder / PLOTS_MANIFEST).write_text("s--P@1.png\n../pyproject.toml\n")
    assert plots_manifest(folder) == "it names files other than plots"


def test_every_option_of_the_group_is_in_the_documented_table(
    pytestconfig: pytest.Config,
) -> None:
    """docs/configuration.md's "Command-line options" table names every option of the
    ``retrieval gate`` group as this session registered it (issue 39: --rg-record and --rg-pin
    were missing), and nothing the group does not have."""
    import re

    group = pytestconfig._parser.getgroup("retrieval gate")
    offered = {name for option in group.options for name in option.names() if name[:2] == "--"}
    doc = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = doc.split("## Command-line options", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    documented = set(re.findall(r"^\| `(--[a-z-]+)", table, flags=re.MULTILINE))
    assert documented == offered
