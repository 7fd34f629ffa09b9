"""What a suite kind adds to the report: typed sections and tables the writers render."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """A table of a report section: its header, its rows of cell text, and a caption line shown
    above it (the system it is about)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


@dataclass(frozen=True)
class Section:
    """A report section a suite kind contributes (its worst units): a title, lines of text and
    tables. Renderers decide the markup."""

    title: str
    lines: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
