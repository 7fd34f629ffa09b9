"""Importing the user's own code named as ``module:attribute`` (retrievers, rerankers)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["import_object"]


def import_object(ref: str, root: Path) -> Any:
    """Import ``module:attribute``; the settings folder is importable, as users expect."""
    import importlib

    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module_name.startswith(exc.name.split(".")[0]):
            raise
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
