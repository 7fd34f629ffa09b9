"""Damage done to a cache file, the same way in every cache kind's test: a flipped bit, a torn
(truncated) file, another entry's file copied over it. Each returns nothing and leaves the file
in place, as a killed writer, a failing disk or a careless copy would."""

from __future__ import annotations

import shutil
from pathlib import Path

#: The three damages every cache kind is tested with (docs/embedding.md, "Caches that cannot lie").
DAMAGES = ("flipped-byte", "truncated", "foreign")


def flip_byte(path: Path, at: int | None = None) -> None:
    """Flip the lowest bit of the byte at ``at`` (default: the middle of the file)."""
    data = path.read_bytes()
    at = len(data) // 2 if at is None else at
    path.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :])


def truncate(path: Path) -> None:
    """Keep the first half of the file, as a writer killed half way would have left it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def damage(path: Path, how: str, *, foreign: Path | None = None) -> None:
    """Do ``how`` (one of `DAMAGES`) to ``path``; ``foreign``: the other entry's file copied over
    it for ``"foreign"``."""
    if how == "flipped-byte":
        flip_byte(path)
    elif how == "truncated":
        truncate(path)
    elif how == "foreign" and foreign is not None:
        shutil.copyfile(foreign, path)
    else:
        raise ValueError(f"no damage {how!r} (with foreign={foreign})")
