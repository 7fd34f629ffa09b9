"""A real `chroma run` server for a test: on 127.0.0.1 at a free port, its data in a folder of
the test's own, stopped (by its process id) when the block ends."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def chroma_server(folder: Path) -> Iterator[int]:
    """A fresh server storing under ``folder`` (created); yields its port. Skips the test where
    the `chroma` CLI is not installed."""
    exe = shutil.which("chroma")
    if exe is None:
        pytest.skip("the `chroma` CLI is not installed (pip install chromadb)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(folder / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [exe, "run", "--path", str(folder / "db"), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    pytest.fail(
                        f"chroma server exited: {(folder / 'server.log').read_text()[-2000:]}"
                    )
                with contextlib.suppress(OSError):
                    url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
                    with urllib.request.urlopen(url, timeout=1) as response:
                        if response.status == 200:
                            break
                if time.monotonic() > deadline:
                    pytest.fail("chroma server did not answer its heartbeat within 30 s")
                time.sleep(0.2)
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
