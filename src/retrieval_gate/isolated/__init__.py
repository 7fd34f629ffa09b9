"""A retriever with ``isolate = true``: its code imported and called in a child process.

An interpreter exit or a crash there ends that process, not pytest; a call past its limit has
the process, and everything it started, stopped. Only data crosses between the two processes
(:mod:`.wire`): pytest never runs code from the child's bytes. :mod:`.parent` is pytest's side
(:class:`IsolatedFunction`), :mod:`.child` the process's own loop. docs/ci.md says what is
promised and what is not (a process that attacks pytest on purpose is out of scope: it is the
team's own code).
"""

from __future__ import annotations

from retrieval_gate.isolated.parent import ChildFailure, IsolatedFunction
from retrieval_gate.isolated.wire import Foreign, short_repr, type_name

__all__ = ["ChildFailure", "Foreign", "IsolatedFunction", "short_repr", "type_name"]
