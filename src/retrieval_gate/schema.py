"""Option tables: the settings' keys, each suite header's and kind's, and each system kind's,
embedder's, index backend's and stage's.

An :class:`Option` says what a key holds (type, check, default) and what it means (``doc``), so
the parser, the "unknown key" message and the docs' option tables all read the same declaration.
One code path parses every table (:func:`parse_table`): an unknown key is "unknown key 'x';
known: ...", a wrong value "invalid 'key': value; expected <type> (<rule>)", each naming the file
and the table. Rules across keys are :class:`Check`s declared beside their table.
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
from retrieval_gate.errors import ConfigError, RetrievalGateError

__all__ = [
    "Check",
    "Entries",
    "Option",
    "OptionTable",
    "Where",
    "as_float",
    "at_least",
    "beside_settings",
    "between",
    "choices",
    "non_empty",
    "one_of",
    "parse_options",
    "parse_table",
    "table_markdown",
    "unknown_key",
    "yaml_number_hint",
]


@dataclass(frozen=True)
class Option:
    """One key of an option table.

    ``kind`` is the accepted Python type(s) after TOML/YAML parsing (a bool is never accepted as
    an int; ``object``: anything); ``check`` further restricts the value and ``rule`` says the
    restriction in words for the messages and the docs (a function where the words come from a
    registry). ``resolve`` turns the written value into the stored one (e.g. a relative model
    path into a folder beside the settings file); it gets the value and the settings folder.
    ``nested`` makes the key a table of its own keys: a function returning their option table
    (a function, so the table's module is imported only when it is parsed); the parsed value is
    that table's values, defaults filled in (also when the key is absent, unless ``default`` is
    None), checked by ``checks``; its unknown keys are errors naming ``system.NAME.key``.
    ``entries`` makes the key a table of names the user chooses (metric names, suite names),
    each value an option of its own (:class:`Entries`).

    ``secret`` marks a value that may hold credentials (a DSN, a URI, an address): what it
    holds (a URL's password, a ``password=``) is masked wherever it shows up later; ``secret_env``
    a value naming the environment variable that holds a secret (``dsn_env``): that variable's
    value is masked whole (display/redact.py).
    """

    kind: type | tuple[type, ...]
    default: Any
    doc: str
    check: Callable[[Any], bool] | None = None
    rule: str | Callable[[], str] = ""
    resolve: Callable[[Any, Path], Any] | None = None
    nested: Callable[[], OptionTable] | None = None
    secret: bool = False
    secret_env: bool = False
    entries: Entries | None = None
    checks: tuple[Check, ...] = ()

    @property
    def expected(self) -> str:
        """What a value must be, for error messages: ``integer (>= 1)``, ``string (auto, on, off)``,
        ``table of metric -> integer or number (>= 0)``."""
        rules = "; ".join(self._rules())
        return f"{self.type_name} ({rules})" if rules else self.type_name

    @property
    def type_name(self) -> str:
        names = {str: "string", int: "integer", bool: "boolean", float: "number", list: "list"}
        names[dict] = "table"  # a TOML table (e.g. the weights of all_weighted)
        names[object] = "any"
        if self.entries is not None:
            names[dict] = f"table of {self.entries.name} -> {self.entries.value.type_name}"
        return " or ".join(names.get(k, k.__name__) for k in _kinds(self))

    def _rules(self) -> list[str]:
        """The rules of a value, its entries' first (``each >= 0``, then ``one > 0``)."""
        own = self.rule() if callable(self.rule) else self.rule
        inner = self.entries.value._rules() if self.entries is not None else []
        return [*inner, *([own] if own else [])]


@dataclass(frozen=True)
class Entries:
    """The entries of a table whose keys the user chooses (``tolerance = {"nDCG@10" = 0.02}``):
    what a key is (``name``, for the docs), how one is checked and spelled (``key``: returns
    the key as stored, e.g. a metric's own spelling, or raises ValueError saying why not), and
    the option every value is. A key spelled twice (``P@1`` and ``p@1``) is an error."""

    name: str
    value: Option
    key: Callable[[str], str] | None = None


@dataclass(frozen=True)
class Check:
    """A rule across the keys of one table, run once each key is parsed: ``fails`` gets the
    parsed values and returns why they break the rule (None when they keep it); ``doc`` says
    the rule in the docs."""

    doc: str
    fails: Callable[[Mapping[str, Any]], str | None]


OptionTable = Mapping[str, Option]


@dataclass(frozen=True)
class Where:
    """Where a table was written, for error messages: the file and the table (``system.NAME``,
    ``history``; "" for the file's top level), the folder relative paths start from, and the
    error a problem is (a :class:`~retrieval_gate.errors.SuiteError` in a suite file)."""

    source: Path | None
    entry: str
    base: Path
    error: type[RetrievalGateError] = ConfigError

    def at(self, key: str) -> Where:
        """The table ``key`` of this one."""
        entry = f"{self.entry}.{key}" if self.entry else key
        return Where(source=self.source, entry=entry, base=self.base, error=self.error)

    def fail(self, message: str) -> RetrievalGateError:
        """The error ``message`` names, at this file and table."""
        return self.error(message, path=self.source, entry=self.entry or None)


def beside_settings(ref: Any, base: Path) -> Any:
    """A model written as a relative path (``./``, ``../``, ``~``) as the folder it names beside
    the settings file, absolute; anything else (a hub id, a package name) unchanged."""
    if isinstance(ref, str) and ref.startswith(("./", "../", "~")):
        return str((base / Path(ref).expanduser()).resolve())
    return ref


def as_float(value: Any, base: Path) -> float:
    """A ``resolve``: a number as a float (TOML's and YAML's ``1`` is an int)."""
    return float(value)


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


def choices(*names: str) -> dict[str, Any]:
    """An option's ``check`` and ``rule`` for one of ``names``: ``Option(str, "a", doc,
    **choices("a", "b"))``."""
    return {"check": one_of(*names), "rule": ", ".join(names)}


def non_empty(value: Any) -> bool:
    """A ``check``: a string with more than blanks, a list or table with an entry."""
    return bool(value.strip()) if isinstance(value, str) else bool(value)


def unknown_key(key: str, known: Iterable[str], where: Where) -> RetrievalGateError:
    return where.fail(f"unknown key {key!r}; known: {', '.join(sorted(known))}")


def parse_table(
    table: OptionTable,
    spec: Mapping[str, Any],
    where: Where,
    *,
    checks: Iterable[Check] = (),
    also: Iterable[str] = (),
) -> dict[str, Any]:
    """The values of ``table``'s keys in ``spec`` (:func:`parse_options`), once no key of
    ``spec`` is unknown (``also``: keys another parser reads), checked by ``checks``."""
    known = [*table, *also]
    unknown = sorted(str(k) for k in spec if k not in known)
    if unknown:
        raise unknown_key(unknown[0], known, where)
    values = parse_options(table, spec, where)
    for check in checks:
        problem = check.fails(values)
        if problem is not None:
            raise where.fail(problem)
    return values


def parse_options(
    table: OptionTable, spec: Mapping[str, Any], where: Where, *, only: Iterable[str] | None = None
) -> dict[str, Any]:
    """The values of ``table``'s keys in ``spec``, checked, with defaults for the missing ones.

    Keys of ``spec`` outside ``table`` are not looked at here (the caller decides which tables
    together make a system's known keys); ``only`` restricts the result to those keys.
    An invalid value is an error "invalid 'key': value; expected <type> (<rule>)" naming
    the file and table.
    """
    keys = table if only is None else [k for k in table if k in set(only)]
    values: dict[str, Any] = {}
    for key in keys:
        option, value = table[key], spec.get(key)
        if value is None and (option.nested is None or option.default is None):
            # A default is written as a user writes it (the docs show it): resolved the same way.
            default, resolve = option.default, option.resolve
            values[key] = (
                default if default is None or resolve is None else resolve(default, where.base)
            )
        else:  # an absent table of declared keys is its defaults
            values[key] = _parse(key, option, {} if value is None else value, where)
    return values


def _parse(key: str, option: Option, value: Any, where: Where) -> Any:
    """One written value of ``option``: checked, then resolved."""
    # Before any check: a message quoting an invalid value masks what it holds.
    _register_secrets(option, value)
    if not _is(option, value):
        raise _invalid(key, value, option, where)
    check, written = option.check, value  # of entries: of the table they make (one weight > 0)
    if isinstance(value, Mapping) and option.nested is not None:
        value = parse_table(option.nested(), value, where.at(key), checks=option.checks)
        check = None
    elif isinstance(value, Mapping) and option.entries is not None:
        value = _parse_entries(option.entries, value, where.at(key))
    elif not _finite(value):
        # inf passes most range checks (inf >= 1) and NaN fails them with a puzzling
        # message: neither is a setting, whatever the key ("no limit" is a value, not inf).
        raise where.fail(
            f"invalid {key!r}: {_shown(value)}; numbers must be finite; expected {option.expected}"
        )
    elif option.entries is not None:  # one value for every entry (``resolution = 0.05``)
        check = option.entries.value.check
        if not _is(option.entries.value, value):
            raise _invalid(key, value, option, where)
    if check is not None and not check(value):
        raise _invalid(key, written, option, where)
    if option.secret_env:
        _check_env_name(key, value, where)
    return option.resolve(value, where.base) if option.resolve is not None else value


def _parse_entries(entries: Entries, table: Mapping[str, Any], where: Where) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for written, value in table.items():
        key = str(written)
        if entries.key is not None:
            try:
                key = entries.key(key)
            except ValueError as exc:
                raise where.fail(str(exc)) from None
        if key in out:  # "P@1" and "p@1": the last would silently win
            raise where.fail(f"{key} is given twice")
        out[key] = _parse(str(written), entries.value, value, where)
    return out


def _is(option: Option, value: Any) -> bool:
    """Whether ``value`` is of ``option``'s kind; TOML's true is an int to Python, but a
    boolean never passes for a number."""
    kinds = _kinds(option)
    if object in kinds:  # anything (a suite's description)
        return True
    return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)


def _invalid(key: str, value: Any, option: Option, where: Where) -> RetrievalGateError:
    hint = ""
    numbers = _kinds(option) + (_kinds(option.entries.value) if option.entries else ())
    if float in numbers and where.source is not None and where.source.suffix in (".yaml", ".yml"):
        hint = yaml_number_hint(value)  # a YAML file's 1e-3 is text
    return where.fail(f"invalid {key!r}: {_shown(value)}; expected {option.expected}{hint}")


def _kinds(option: Option) -> tuple[type, ...]:
    return option.kind if isinstance(option.kind, tuple) else (option.kind,)


def _shown(value: Any) -> str:
    """A written value as a message quotes it, cut short (a whole list of queries is no help)."""
    text = repr(value)
    return text if len(text) <= 120 else text[:100] + " ..."


def yaml_number_hint(value: Any) -> str:
    """Why a number came as text: YAML 1.1 (PyYAML) reads ``1e-3`` as a string, because its
    floats need a dot; the hint says how to write it."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number) or "e" not in value.lower():
        return ""
    mantissa, _, exponent = value.strip().lower().partition("e")
    if "." in mantissa and exponent[:1] in ("+", "-"):
        return ""  # YAML reads it as a number unquoted: it was quoted
    # A YAML 1.1 float needs a dot in its mantissa and a sign in its exponent.
    dotted = mantissa if "." in mantissa else f"{mantissa}.0"
    signed = exponent if exponent[:1] in ("+", "-") else f"+{exponent}"
    return f" (YAML reads {value.strip()} as text: write {dotted}e{signed})"


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_env_name(key: str, name: str, where: Where) -> None:
    """Refuse, without quoting it, a secret written where the name of the variable that holds
    it belongs (``api_key_env``, ``dsn_env``): every later "variable NAME is not set" would
    print it whole."""
    advice = "give the name of the variable that holds the secret, never the secret itself"
    if not _ENV_NAME.fullmatch(name):
        raise where.fail(
            f"invalid {key!r}: not an environment variable name (letters, digits, '_'); {advice}"
        )
    if name not in os.environ and _looks_like_a_key(name):
        # A hex or base62 key (or jina_...) is a valid variable name too.
        raise where.fail(
            f"invalid {key!r}: no environment variable of that name is set, and the name looks "
            f"like a key itself (a long run of letters and digits); {advice}"
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


def _finite(value: Any, deep: bool = True) -> bool:
    """No NaN or infinity in ``value``: a number, or the numbers of a list or table (a table's
    tables, such as the systems', are their own options' to check)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if deep and isinstance(value, Mapping):
        return all(_finite(v, False) for v in value.values())
    if deep and isinstance(value, (list, tuple)):
        return all(_finite(v, False) for v in value)
    return True


def table_markdown(table: OptionTable, checks: Iterable[Check] = ()) -> list[str]:
    """The rows of a markdown table of ``table``: key, type, default, meaning (for the docs);
    then the rules across its keys, ``checks``."""
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, option in table.items():
        # Written as in TOML (true, "words", []), the way a user types it.
        default = "(none)" if option.default is None else f"`{json.dumps(option.default)}`"
        doc = option.doc
        if option.secret:
            doc += "; its credentials are masked (`***`) in every output"
        if option.secret_env:
            doc += "; the variable's value is masked (`***`) in every output"
        lines.append(f"| `{key}` | {option.expected} | {default} | {doc} |")
    rules = [f"- {check.doc}" for check in checks]
    return lines + (["", "Checked across keys:", "", *rules] if rules else [])
