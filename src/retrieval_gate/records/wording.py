"""How records write values and scopes in messages and tables: a metric value, a query's text
on one line, a group's scope name (``category[joins]``) and its parse."""

from __future__ import annotations


def scope_name(kind: str, label: str) -> str:
    """The name of a group of queries: ``category[joins]``, ``difficulty[hard]``."""
    return f"{kind}[{label}]"


def parse_scope(scope: str) -> tuple[str, str] | None:
    """(kind, label) of a ``category[x]`` / ``difficulty[x]`` scope, None for ``suite``."""
    if scope == "suite":
        return None
    kind, _, rest = scope.partition("[")
    return kind, rest.removesuffix("]")


def shorten(text: str, width: int = 60) -> str:
    """Query text as messages and tables show it: one line, at most ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def format_value(value: float) -> str:
    """A metric value as messages show it: 4 decimals, trailing zeros dropped, ``nan`` for NaN."""
    if value != value:
        return "nan"
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text  # a value that rounds to zero has no sign


def format_delta(value: float) -> str:
    """A signed difference as messages show it, ``+0.0312``; one that rounds to zero is
    ``0.0000``, never ``-0.0000``."""
    text = f"{value:+.4f}"
    return "0.0000" if text in ("+0.0000", "-0.0000") else text
