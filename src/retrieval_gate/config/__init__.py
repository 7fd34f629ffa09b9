"""The project's settings: ``[tool.retrieval_gate]`` in pyproject.toml or ``retrieval-gate.yaml``
read into frozen :class:`Settings` (:mod:`.settings`), the decision weights (:mod:`.decision`) and
the generated option reference of docs/configuration.md (:mod:`.reference`)."""

from __future__ import annotations

from retrieval_gate.config.settings import (
    DEFAULT_CACHE_DIR,
    Settings,
    find_settings_file,
    ignored_settings,
    load_settings,
    parse_settings,
    suite_system_options,
)

__all__ = [
    "DEFAULT_CACHE_DIR",
    "Settings",
    "find_settings_file",
    "ignored_settings",
    "load_settings",
    "parse_settings",
    "suite_system_options",
]
