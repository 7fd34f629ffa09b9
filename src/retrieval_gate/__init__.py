"""pytest-retrieval-gate: retrieval quality as a CI gate.

Importing this package is cheap: the pytest plugin (``retrieval_gate.plugin``) is loaded in every
pytest session, with or without ``--retrieval-gate``, so nothing heavy (numpy included) may be
imported here. ``evaluate`` is resolved lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval_gate.version import __version__

__all__ = ["__version__", "evaluate"]

if TYPE_CHECKING:
    from retrieval_gate.metrics import evaluate


def __getattr__(name: str) -> Any:
    if name == "evaluate":
        from retrieval_gate.metrics import evaluate

        return evaluate
    raise AttributeError(f"module 'retrieval_gate' has no attribute {name!r}")
