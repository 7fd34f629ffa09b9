"""Embedding cache: vectors keyed by the digest of the exact text embedded, per model identity.

Layout: ``root / sha256(identity)[:16] /`` holds ``identity.txt`` (the full identity, for
people), ``width.txt`` (the vector width of the model that filled it, so a warm run that loads
no model still drops a shard of another width) and append-only shards ``shard-<uuid>.npz`` (arrays ``digests``: str, ``vectors``:
float32 ``[n, dim]``). Shards are written under a temporary name in the same folder and renamed
into place, so readers never see a partial file and concurrent writers (xdist workers, parallel
CI jobs) never touch each other's files. When more than `MAX_SHARDS` pile up, `store` merges
them into one the same way and then removes the merged ones. A shard that cannot be read is
reported with `CacheWarning`, deleted, and its entries count as missing (they are re-embedded).
No pickle anywhere: ``np.load(allow_pickle=False)``. A folder that cannot be written (a
read-only or full disk) is reported once with `CacheWarning`; the run goes on without storing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval_gate.errors import CacheWarning

__all__ = ["MAX_SHARDS", "EmbeddingCache"]

#: More shards than this and `store` compacts them into one.
MAX_SHARDS = 32

_SHARD_GLOB = "shard-*.npz"
# The vector width of the model that filled the folder, written with the first shard.
_WIDTH_FILE = "width.txt"
_TMP_PREFIX = ".tmp-"
# A temporary file older than this was left by a crashed writer, not one still writing.
_STALE_TMP_SECONDS = 3600.0
# Listing then loading races with another process's compaction; a few rescans settle it.
_SCAN_ATTEMPTS = 3


class _Unreadable(Exception):
    pass


def _load_shard(path: Path, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """Read one shard; FileNotFoundError passes through, any damage is `_Unreadable`.

    The zip's CRC-32 of each array catches a flipped or torn byte (numpy reads each array to
    its end, where zipfile checks it); ``owner`` (sha256 of the embedder identity, written in
    every shard) catches a shard copied from another identity's folder, whose vectors of the
    same width would otherwise answer for this model's texts. Shards written before the owner
    was recorded have none and are read as they are.
    """
    from retrieval_gate.files.read import open_regular

    try:
        # Our own file handle: np.load(path) leaks its handle when the zip is truncated; opened
        # through the guarded door, so a pipe by a shard's name is damage, not a hang.
        with (
            open_regular(path, what="embedding cache shard") as fh,
            np.load(fh, allow_pickle=False) as data,
        ):
            digests = np.asarray(data["digests"])
            vectors = np.asarray(data["vectors"])
            written_for = str(data["owner"]) if "owner" in data.files else owner
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise _Unreadable(str(exc) or type(exc).__name__) from exc
    if written_for != owner:
        raise _Unreadable("written for another embedder identity, not this folder's")
    if digests.ndim != 1 or digests.dtype.kind != "U":
        raise _Unreadable(f"digests have dtype {digests.dtype} and shape {digests.shape}")
    if vectors.ndim != 2 or vectors.dtype != np.float32 or vectors.shape[0] != digests.shape[0]:
        raise _Unreadable(
            f"vectors have dtype {vectors.dtype} and shape {vectors.shape} "
            f"for {digests.shape[0]} digests"
        )
    return digests, vectors


class EmbeddingCache:
    """Cached vectors for one embedder identity.

    `lookup(digests)` returns ``(found_vectors, missing_positions)``: the cached vectors, as
    float32 ``[n_found, dim]``, in the order their digests appear in `digests`, and the positions
    in `digests` that are not cached. The array may be a read-only view of a loaded shard (when
    the digests are exactly one shard's, in its order); copy it before changing it. The found rows belong to the positions *not* listed in
    `missing_positions`, in increasing order. With nothing found the array is ``[0, dim]``
    (``[0, 0]`` while the cache is empty and ``dim`` was not given).

    ``dim``, the embedder's vector size, makes any shard of another size damaged: it is
    deleted with a `CacheWarning` and its entries are re-embedded. Without it the first shard
    read sets the size.
    """

    def __init__(self, root: Path, identity: str, dim: int | None = None) -> None:
        self.identity = identity
        #: sha256 of the identity, written in every shard and checked when one is read.
        self.owner = hashlib.sha256(identity.encode()).hexdigest()
        self.directory = self.folder(root, identity)
        self._loaded: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._index: dict[str, tuple[str, int]] | None = None
        #: Why shards were dropped this session (damaged, or of another width), one per shard.
        self.dropped: list[str] = []
        #: Why the folder cannot be written (a read-only or full disk), None when it can.
        self.unwritable: str | None = None
        # The embedder's dimension when the caller knows it: a shard of any other width is
        # damaged (re-embedded), not a numpy shape error in the caller. Else the width the
        # folder recorded when a model last filled it (so a warm run, which loads no model,
        # checks what a cold one would), else the first shard's.
        self._dim: int | None = dim
        self._dim_from = "the embedder gives"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write_identity()
        except OSError as exc:
            self._cannot_write(exc)
        if self._dim is None:
            self._dim = self._recorded_width()
            self._dim_from = "the model gave when the cache was filled"
        if self._dim is None:
            self._dim_from = "the cache holds"

    def __repr__(self) -> str:
        return f"EmbeddingCache({self.directory})"

    @staticmethod
    def folder(root: Path, identity: str) -> Path:
        """The folder under ``root`` that holds ``identity``'s vectors."""
        return Path(root) / hashlib.sha256(identity.encode()).hexdigest()[:16]

    @staticmethod
    def digest(text: str) -> str:
        """sha256 hex digest of the exact text that is embedded."""
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    # -- files ---------------------------------------------------------------------------

    def _cannot_write(self, exc: OSError) -> None:
        # A read-only or full disk costs embedding again next run, never this run.
        self.unwritable = exc.strerror or str(exc)
        warnings.warn(
            f"embedding cache {self.directory} cannot be written ({self.unwritable}); vectors "
            "are embedded and not kept: give a writable folder with --rg-cache-dir",
            CacheWarning,
            stacklevel=3,
        )

    def _recorded_width(self) -> int | None:
        from retrieval_gate.errors import RetrievalGateError
        from retrieval_gate.files.read import read_text

        path = self.directory / _WIDTH_FILE
        if not path.exists():
            return None
        try:
            text = read_text(path, what="embedding cache width").strip()
        except RetrievalGateError:
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def _record_width(self, dim: int) -> None:
        path = self.directory / _WIDTH_FILE
        if self._recorded_width() != dim:
            self._atomic_write(path, f"{dim}\n".encode())

    def _write_identity(self) -> None:
        target = self.directory / "identity.txt"
        if target.exists():
            return
        self._atomic_write(target, (self.identity + "\n").encode("utf-8"))

    def _tmp_path(self, suffix: str) -> Path:
        return self.directory / f"{_TMP_PREFIX}{uuid.uuid4().hex}{suffix}"

    def _atomic_write(self, target: Path, payload: bytes) -> None:
        tmp = self._tmp_path(target.suffix)
        try:
            with open(tmp, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    def _write_shard(self, digests: np.ndarray, vectors: np.ndarray) -> Path:
        final = self.directory / f"shard-{uuid.uuid4().hex}.npz"
        tmp = self._tmp_path(".npz")
        try:
            # A file object, so numpy does not append its own ".npz" to the temporary name.
            with open(tmp, "wb") as fh:
                np.savez(fh, digests=digests, vectors=vectors, owner=np.array(self.owner))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return final

    def shard_paths(self) -> list[Path]:
        """The complete shards now on disk (temporary files are never listed)."""
        return sorted(self.directory.glob(_SHARD_GLOB))

    def _drop_damaged(self, path: Path, reason: str) -> None:
        # Deleted before warning: under filterwarnings=error the warning raises, and the damaged
        # shard must still be gone so the next run rebuilds it.
        with contextlib.suppress(OSError):
            path.unlink()
        self.dropped.append(reason)
        warnings.warn(
            f"embedding cache shard {path} is unreadable ({reason}); deleted it, its "
            "entries will be re-embedded",
            CacheWarning,
            stacklevel=4,
        )

    def _refresh(self) -> dict[str, tuple[str, int]]:
        """Load shards not seen yet, forget vanished ones, and rebuild the digest index."""
        index = self._index
        for _ in range(_SCAN_ATTEMPTS):
            paths = self.shard_paths()
            names = {p.name for p in paths}
            changed = False
            for gone in set(self._loaded) - names:
                del self._loaded[gone]
                changed = True
            raced = False
            for path in paths:
                if path.name in self._loaded:
                    continue
                try:
                    digests, vectors = _load_shard(path, self.owner)
                except FileNotFoundError:
                    # Compacted away by another process after we listed it; its entries now
                    # live in a newer shard that a rescan finds.
                    raced = True
                    continue
                except _Unreadable as exc:
                    self._drop_damaged(path, str(exc))
                    continue
                if self._dim is None and vectors.shape[0]:
                    self._dim = int(vectors.shape[1])
                if vectors.shape[0] and vectors.shape[1] != self._dim:
                    self._drop_damaged(
                        path, f"dimension {vectors.shape[1]}, {self._dim_from} {self._dim}"
                    )
                    continue
                self._loaded[path.name] = (digests, vectors)
                changed = True
            if changed or index is None:
                index = {}
                for name, (digests, _) in self._loaded.items():
                    for row, digest in enumerate(digests.tolist()):
                        index[digest] = (name, row)
                self._index = index
            if not raced:
                break
        return index if index is not None else {}

    # -- public --------------------------------------------------------------------------

    def lookup(self, digests: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        """Cached vectors for `digests` and the positions that are missing (see class doc)."""
        index = self._refresh()
        hits: list[tuple[str, int]] = []
        missing: list[int] = []
        for position, digest in enumerate(digests):
            hit = index.get(digest)
            if hit is None:
                missing.append(position)
            else:
                hits.append(hit)
        dim = self._dim or 0
        if not hits:
            return np.zeros((0, dim), dtype=np.float32), missing
        names = {name for name, _ in hits}
        rows = np.fromiter((row for _, row in hits), dtype=np.int64, count=len(hits))
        if len(names) == 1:
            vectors = self._loaded[hits[0][0]][1]
            if rows.size == vectors.shape[0] and np.array_equal(rows, np.arange(rows.size)):
                # A whole shard in its own order (a warm run over what one cold run stored):
                # the shard's array itself, read-only, rather than a second copy of it.
                vectors.flags.writeable = False
                return vectors, missing
        code = {name: i for i, name in enumerate(sorted(names))}
        shard_of = np.fromiter((code[n] for n, _ in hits), dtype=np.int64, count=len(hits))
        out = np.empty((len(hits), dim), dtype=np.float32)
        for name, i in code.items():
            mine = shard_of == i
            out[mine] = self._loaded[name][1][rows[mine]]
        return out, missing

    def store(self, digests: Sequence[str], vectors: np.ndarray) -> None:
        """Add vectors for `digests` as one new shard; compacts when shards pile up."""
        digest_list = [str(d) for d in digests]
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or array.shape[0] != len(digest_list):
            raise ValueError(
                f"store() got {len(digest_list)} digests and vectors of shape {array.shape}"
            )
        if not digest_list or self.unwritable is not None:
            return
        if not np.isfinite(array).all():
            raise ValueError("store() got NaN or infinite vectors; they are never cached")
        self._refresh()
        if self._dim is not None and array.shape[1] != self._dim:
            raise ValueError(
                f"vectors have dimension {array.shape[1]}, the cache holds {self._dim}"
            )
        # Stored vectors come from the model: their width is the one every later run checks.
        self._record_width(int(array.shape[1]))
        self._write_shard(np.array(digest_list, dtype=str), np.ascontiguousarray(array))
        if len(self.shard_paths()) > MAX_SHARDS:
            self.compact()

    def compact(self) -> None:
        """Merge every shard into one new shard, then delete the merged ones.

        Safe against a concurrent compaction: only shards this call read are deleted, and only
        after the merged shard is in place, so every entry stays on disk in some shard
        (at worst twice, until the next compaction).
        """
        merged_digests: list[str] = []
        merged_vectors: list[np.ndarray] = []
        seen: set[str] = set()
        read: list[Path] = []
        dim = self._dim
        for path in self.shard_paths():
            try:
                digests, vectors = _load_shard(path, self.owner)
            except FileNotFoundError:
                continue
            except _Unreadable as exc:
                self._drop_damaged(path, str(exc))
                continue
            if vectors.shape[0] and dim is not None and vectors.shape[1] != dim:
                self._drop_damaged(path, f"dimension {vectors.shape[1]}, {self._dim_from} {dim}")
                continue
            if dim is None and vectors.shape[0]:
                dim = int(vectors.shape[1])
            read.append(path)
            for row, digest in enumerate(digests.tolist()):
                if digest not in seen:
                    seen.add(digest)
                    merged_digests.append(digest)
                    merged_vectors.append(vectors[row])
        if len(read) > 1 and merged_vectors:
            self._write_shard(
                np.array(merged_digests, dtype=str), np.stack(merged_vectors).astype(np.float32)
            )
            for path in read:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self._remove_stale_tmp()
        self._loaded.clear()
        self._index = None

    def _remove_stale_tmp(self) -> None:
        cutoff = time.time() - _STALE_TMP_SECONDS
        for tmp in self.directory.glob(_TMP_PREFIX + "*"):
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
