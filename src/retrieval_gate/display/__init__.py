"""What the plugin shows of text it did not write: held-out units and credentials masked,
control characters escaped.

Two functions, applied wherever user or server text leaves the plugin (failure text, the
terminal summary, the markdown, JSON and JUnit outputs, progress lines, and pytest's own
channels: warnings, captured output, log lines, report/channels.py): :func:`redact`
(``redact.py``, which masks the session's held-out units first, ``held.py``) and :func:`escape`
(``escape.py``); :func:`shown` is both, in that order.
Another service's answer is quoted by :func:`quoted`, an HTML page said first by its title or
its words (:func:`page_text`, ``page.py``).
Standard library only, at the bottom of the layers: every other module may use them.
"""

from __future__ import annotations

from retrieval_gate.display.escape import escape
from retrieval_gate.display.held import (
    HELD_OUT_NAME,
    HeldOut,
    distinctive,
    folded,
    held_out_sealed,
    scrub_held_out,
    seal_held_out,
    unseal_held_out,
)
from retrieval_gate.display.page import page_text, quoted
from retrieval_gate.display.redact import (
    MASK,
    forget_secrets,
    redact,
    redact_tree,
    register_secret,
    register_secrets_in,
    secrets_in,
)

__all__ = [
    "HELD_OUT_NAME",
    "MASK",
    "HeldOut",
    "distinctive",
    "escape",
    "folded",
    "forget_secrets",
    "held_out_sealed",
    "page_text",
    "quoted",
    "redact",
    "redact_tree",
    "register_secret",
    "register_secrets_in",
    "scrub_held_out",
    "seal_held_out",
    "secrets_in",
    "shown",
    "unseal_held_out",
]


def shown(text: object, *, multiline: bool = False) -> str:
    """``text`` as it may be shown: credentials masked (:func:`redact`), then control
    characters escaped (:func:`escape`; newlines kept when ``multiline``)."""
    return escape(redact(str(text)), multiline=multiline)
