"""Option tables: each system kind, embedder, index backend and stage declares its own keys.

An :class:`Option` says what a key holds (type, check, default) and what it means (``doc``), so
the parser, the "unknown key" message and the docs' option tables all read the same declaration.
Standard library only: settings are parsed while collecting.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_gate.display import register_secret, register_secrets_in
from retrieval_gate.errors import ConfigError

__all__ = [
    "Option",
    "OptionTable",
    "Where",
    "at_least",
    "beside_settings",
    "between",
    "one_of",
    "parse_options",
    "table_markdown",
    "unknown_key",
]


@dataclass(frozen=True)
class Option:
    """One key of an option table.

    ``kind`` is the accepted Python type(s) after TOML/YAML parsing (a bool is never accepted as
    an int); ``check`` further restricts the value and ``rule`` says the restriction in words for
    the docs. ``resolve`` turns the written value into the stored one (e.g. a relative model path
    into a folder beside the settings file); it gets the value and the settings folder.
    ``nested`` makes the key a table of its own keys: a function returning their option table
    (a function, so the table's module is imported only when a system is parsed); the parsed
    value is that table's values, defaults filled in, and its unknown keys are errors naming
    ``system.NAME.key``.

    ``secret`` marks a value that may hold credentials (a DSN, a URI, an address): what it
    holds (a URL's password, a ``password=``) is masked wherever it shows up later; ``secret_env``
    a value naming the environment variable that holds a secret (``dsn_env``): that variable's
    value is masked whole (display/redact.py).
    """

    kind: type | tuple[type, ...]
    default: Any
    doc: str
    check: Callable[[Any], bool] | None = None
    rule: str = ""
    resolve: Callable[[Any, Path], Any] | None = None
    nested: Callable[[], OptionTable] | None = None
    secret: bool = False
    secret_env: bool = False

    @property
    def expected(self) -> str:
        """What a value must be, for error messages: ``integer (>= 1)``, ``string (auto, on, off)``."""
        return f"{self.type_name} ({self.rule})" if self.rule else self.type_name

    @property
    def type_name(self) -> str:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        names = {str: "string", int: "integer", bool: "boolean", float: "number", list: "list"}
        names[dict] = "table"  # a TOML table (e.g. the weights of all_weighted)
        return " or ".join(names.get(k, k.__name__) for k in kinds)


OptionTable = Mapping[str, Option]


@dataclass(frozen=True)
class Where:
    """Where a table was written, for error messages: the settings file and ``system.NAME``."""

    source: Path | None
    entry: str
    base: Path


def beside_settings(ref: Any, base: Path) -> Any:
    """A model written as a relative path (``./``, ``../``, ``~``) as the folder it names beside
    the settings file, absolute; anything else (a hub id, a package name) unchanged."""
    if isinstance(ref, str) and ref.startswith(("./", "../", "~")):
        return str((base / Path(ref).expanduser()).resolve())
    return ref


def at_least(low: int) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return bool(value >= low)

    return check


def between(low: int, high: int) -> dict[str, Any]:
    """An option's ``check`` and ``rule`` for a whole number from ``low`` to ``high``, both
    included: ``Option(int, None, doc, **between(2, 100))``. The bound a message and the docs
    state is the one checked."""

    def check(value: Any) -> bool:
        return bool(low <= value <= high)

    return {"check": check, "rule": f"{low} to {high}"}


def one_of(*choices: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return value in choices

    return check


def unknown_key(key: str, known: Iterable[str], where: Where) -> ConfigError:
    return ConfigError(
        f"unknown key {key!r}; known: {', '.join(sorted(known))}",
        path=where.source,
        entry=where.entry,
    )


def parse_options(
    table: OptionTable, spec: Mapping[str, Any], where: Where, *, only: Iterable[str] | None = None
) -> dict[str, Any]:
    """The values of ``table``'s keys in ``spec``, checked, with defaults for the missing ones.

    Keys of ``spec`` outside ``table`` are not looked at here (the caller decides which tables
    together make a system's known keys); ``only`` restricts the result to those keys.
    An invalid value is a ``ConfigError`` "invalid 'key': value; expected <type> (<rule>)" naming
    the file and entry.
    """
    keys = table if only is None else [k for k in table if k in set(only)]
    values: dict[str, Any] = {}
    for key in keys:
        option = table[key]
        if option.nested is not None:
            values[key] = _parse_nested(key, option.nested(), spec.get(key), where)
            continue
        if key not in spec or spec[key] is None:
            values[key] = option.default
            continue
        value = spec[key]
        # Before any check: a message quoting an invalid value masks what it holds.
        _register_secrets(option, value)
        kinds = option.kind if isinstance(option.kind, tuple) else (option.kind,)
        # TOML's true is an int to Python: a boolean never passes for a number.
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if ok and not _finite(value):
            # inf passes most range checks (inf >= 1) and NaN fails them with a puzzling
            # message: neither is a setting, whatever the key ("no limit" is a value, not inf).
            raise ConfigError(
                f"invalid {key!r}: {value!r}; numbers must be finite; expected {option.expected}",
                path=where.source,
                entry=where.entry,
            )
        if ok and option.check is not None:
            ok = option.check(value)
        if not ok:
            raise ConfigError(
                f"invalid {key!r}: {value!r}; expected {option.expected}",
                path=where.source,
                entry=where.entry,
            )
        if option.secret_env:
            _check_env_name(key, value, where)
        values[key] = option.resolve(value, where.base) if option.resolve is not None else value
    return values


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_env_name(key: str, name: str, where: Where) -> None:
    """Refuse, without quoting it, a secret written where the name of the variable that holds
    it belongs (``api_key_env``, ``dsn_env``): every later "variable NAME is not set" would
    print it whole."""
    advice = "give the name of the variable that holds the secret, never the secret itself"
    if not _ENV_NAME.fullmatch(name):
        raise ConfigError(
            f"invalid {key!r}: not an environment variable name (letters, digits, '_'); {advice}",
            path=where.source,
            entry=where.entry,
        )
    if name not in os.environ and _looks_like_a_key(name):
        # A hex or base62 key (or jina_...) is a valid variable name too.
        raise ConfigError(
            f"invalid {key!r}: no environment variable of that name is set, and the name looks "
            f"like a key itself (a long run of letters and digits); {advice}",
            path=where.source,
            entry=where.entry,
        )


def _looks_like_a_key(name: str) -> bool:
    """Whether ``name`` is shaped as API keys are (a long run of letters and digits, lower
    case among them, at most one ``_``: hex, base62, ``jina_...``) and variable names are not
    (``OPENAI_API_KEY``, ``azure_openai_api_key_2024``)."""
    return (
        len(name) >= 24
        and sum(c.isdigit() for c in name) >= 4
        and any(c.islower() for c in name)
        and name.count("_") <= 1
    )


def _register_secrets(option: Option, value: Any) -> None:
    """Register the secrets a ``secret`` or ``secret_env`` value holds or names, as it is read:
    from then on every message and output of this process masks them."""
    if not isinstance(value, str):
        return
    if option.secret:
        register_secrets_in(value)
    if option.secret_env:
        held = os.environ.get(value, "")
        register_secret(held.strip())
        register_secrets_in(held)


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (a number, or a list or table of them)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


def _parse_nested(key: str, table: OptionTable, value: Any, where: Where) -> dict[str, Any]:
    inner = Where(source=where.source, entry=f"{where.entry}.{key}", base=where.base)
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"invalid {key!r}: {value!r}", path=where.source, entry=where.entry)
    unknown = sorted(str(k) for k in value if k not in table)
    if unknown:
        raise unknown_key(unknown[0], table, inner)
    return parse_options(table, value, inner)


def table_markdown(table: OptionTable) -> list[str]:
    """The rows of a markdown table of ``table``: key, type, default, meaning (for the docs)."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, option in table.items():
        # Written as in TOML (true, "words", []), the way a user types it.
        default = "(none)" if option.default is None else f"`{json.dumps(option.default)}`"
        rule = f" ({option.rule})" if option.rule else ""
        doc = option.doc
        if option.secret:
            doc += "; its credentials are masked (`***`) in every output"
        if option.secret_env:
            doc += "; the variable's value is masked (`***`) in every output"
        lines.append(f"| `{key}` | {option.type_name}{rule} | {default} | {doc} |")
    return lines
