"""Which pyproject.toml table the YAML settings file overrides (and so the gate does not read)."""

from __future__ import annotations

from pathlib import Path

from retrieval_gate.config import ignored_settings

TABLE = '[tool.retrieval_gate]\nsystems = ["a"]\n'


def test_a_table_beside_the_yaml_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(TABLE)
    (tmp_path / "retrieval-gate.yml").write_text("systems: [a]\n")
    assert ignored_settings(tmp_path) == tmp_path / "pyproject.toml"


def test_nothing_is_ignored_with_one_source(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(TABLE)
    assert ignored_settings(tmp_path) is None  # the table is the settings
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 99\n")
    (tmp_path / "retrieval-gate.yaml").write_text("systems: [a]\n")
    assert ignored_settings(tmp_path) is None  # pyproject.toml holds no gate settings
