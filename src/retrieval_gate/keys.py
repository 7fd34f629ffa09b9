"""The stash key the plugin and the collectors share, in a module neither of them owns, so that
neither imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from retrieval_gate.session import GateSession

SESSION_KEY: pytest.StashKey[GateSession] = pytest.StashKey()
