"""How records write values and scopes in messages and tables: a metric value, a query's text
on one line, a group's scope name (``category:joins``) and its parse, a count with its noun."""

from __future__ import annotations


def scope_name(kind: str, label: str) -> str:
    """The name of a group of queries: ``category:joins``, ``difficulty:hard``; also its node's
    name in node ids (``...::minilm::category:joins::P@5``).

    Not ``category[joins]``: pytest reads a ``[`` in a node id as the start of the last part's
    parameters, so an item under such a collector could not be named on the command line
    (``ERROR: not found: ...::category``) and, with pytest 9, ``--lf`` did not rerun it when it
    failed (its id, read back from the cache, no longer equals the collected one). A label is
    letters, digits, ``_`` and ``-`` (suites/units.py), so the name holds no ``::``; ``-k``
    takes it whole (``-k category:joins``)."""
    return f"{kind}:{label}"


def parse_scope(scope: str) -> tuple[str, str] | None:
    """(kind, label) of a ``category:x`` / ``difficulty:x`` scope, None for ``suite``."""
    if scope == "suite":
        return None
    kind, _, label = scope.partition(":")
    return kind, label


#: The most characters of an id that messages and tables show (:func:`shown_id`).
ID_WIDTH = 100


def shown_id(doc: str) -> str:
    """An id as messages and tables show it: whole, or its first ``ID_WIDTH`` characters. An id
    is whatever a system returned (a whole passage, by mistake), and one line stays readable."""
    return doc if len(doc) <= ID_WIDTH else doc[: ID_WIDTH - 1] + "…"


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


def plural(n: float, word: str, words: str | None = None) -> str:
    """``word`` for one (``n`` as shown: 1 day, 1.5 days), else its plural: ``words`` when given (an irregular one), else the
    English rule (``query`` -> ``queries``, ``pass`` -> ``passes``, ``suite`` -> ``suites``).
    Every count a message or a report words goes through here or :func:`counted`, so none says
    "1 queries" or "suite(s)"."""
    if n == 1:
        return word
    if words is not None:
        return words
    if word.endswith("y") and word[-2:-1] not in ("", "a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def counted(n: int, word: str, words: str | None = None) -> str:
    """``n`` with its noun in the right number: ``1 query``, ``0 queries``, ``2 suites``."""
    return f"{n} {plural(n, word, words)}"


def resolves_nothing(epsilon: float, width: float | None) -> bool:
    """Whether a resolution of ``epsilon`` is as wide as the metric's range ``width``: then no
    tolerance can tell a real drop from none, and "+-1.087" on a [0, 1] metric means nothing."""
    return width is not None and width > 0 and epsilon >= width


def resolution_words(
    epsilon: float, width: float | None, reliability: float, *, this_run: bool = False
) -> str:
    """An item's resolution as every message says it: ``resolution +-0.06 at 95 %``, or, as
    wide as the metric's range ``width``, ``resolves no drop at 95 %`` (docs/verdicts.md).
    ``this_run``: the run's own, of its own drops, labelled so (``this run's resolution
    +-0.06 at 95 %``), apart from the suite's advice from the baseline."""
    percent = f"{100.0 * reliability:.4g} %"
    if resolves_nothing(epsilon, width):
        return f"{'this run ' if this_run else ''}resolves no drop at {percent}"
    whose = "this run's " if this_run else ""
    return f"{whose}resolution +-{format_value(epsilon)} at {percent}"
