"""The ``chroma-server`` index: a collection on a running chroma server (``chroma run``),
searched through :mod:`.chroma`'s client; the host, port and answer time limit are its own keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval_gate.index import HNSW_OPTIONS, Index, IndexBackend, hnsw_settings
from retrieval_gate.schema import Option, between
from retrieval_gate.usercode import DEFAULT_TIMEOUT_S


def _open(cache_dir: Path, key: str, options: Mapping[str, Any]) -> Index:
    from retrieval_gate.index.chroma import open_server

    return open_server(
        options["host"],
        options["port"],
        key,
        hnsw=hnsw_settings(options),
        timeout=options.get("timeout", DEFAULT_TIMEOUT_S),
    )


ORDER = 30
BACKEND = IndexBackend(
    name="chroma-server",
    options={
        "host": Option(str, "127.0.0.1", "host of a running `chroma run` server", secret=True),
        "port": Option(int, 8000, "its port", **between(1, 65535)),
        # The system's own 'timeout' (the same key): how long the server may take to answer.
        "timeout": Option(
            (int, float),
            DEFAULT_TIMEOUT_S,
            "seconds the server may take to answer a request (the system's `timeout`); "
            "0 for no limit",
            check=lambda v: v >= 0,
            rule=">= 0; 0 for no limit",
        ),
        **HNSW_OPTIONS,
    },
    open=_open,
    summary="a collection on a running chroma server",
    # The server builds (and replays) the graph as it likes: never promised to rank the same.
    reproducible=False,
)
