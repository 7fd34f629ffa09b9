"""Cache entries that say what they hold, and are checked against it when read back.

A sealed entry is a JSON document ``{"sealed": 1, "key": KEY, "sha256": DIGEST, "payload": ...}``:
``KEY`` names the entry (the question it answers: an index's identity and shard, the inputs of a
measurement) and ``DIGEST`` is the sha256 of the payload's canonical JSON (sorted keys, no
spaces; floats by ``repr``, so they read back bit for bit). :func:`read_sealed` gives the payload
only when the file parses, its digest matches and its key is the one asked for. A torn file (a
killed writer, a truncated copy), a flipped byte, an edited value or another entry's file copied
over it is said in one `CacheWarning` line naming the file, and answers nothing: the caller
computes the entry again and writes it over the bad one. Entries are written whole to a
temporary file and renamed into place (:func:`write_sealed`), so concurrent writers leave a
complete entry or none.

Entries that are not JSON (an ONNX export, a distilled model's weights, an index's files) are
sealed by a record beside them: :func:`write_files_record` writes a sealed entry listing each
file's sha256, and :func:`check_files_record` gives its payload only when the record is sound and
every file it lists still has that digest; a file that does not is named in the one warning line.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval_gate.errors import CacheWarning, RetrievalGateError

__all__ = [
    "NotSealed",
    "SealBroken",
    "check_files_record",
    "file_digest",
    "payload_digest",
    "read_sealed",
    "seal",
    "unseal",
    "write_files_record",
    "write_sealed",
]

_FORMAT = 1


class SealBroken(ValueError):
    """A sealed entry that cannot be trusted; the message says why."""


class NotSealed(SealBroken):
    """A JSON object written before entries were sealed: stale, not damaged (a miss, unsaid)."""


def payload_digest(payload: Any) -> str:
    """sha256 of ``payload``'s canonical JSON."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal(key: str, payload: Any) -> str:
    """The sealed JSON text of ``payload`` under ``key``."""
    document = {
        "sealed": _FORMAT,
        "key": key,
        "sha256": payload_digest(payload),
        "payload": payload,
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def unseal(text: str, key: str) -> Any:
    """The payload of sealed ``text`` written under ``key``; `SealBroken` saying why not."""
    try:
        document = json.loads(text)
    except ValueError:
        raise SealBroken("not complete JSON (torn or damaged)") from None
    if isinstance(document, dict) and "sealed" not in document:
        raise NotSealed("written before cache entries were sealed")
    if not isinstance(document, dict) or document.get("sealed") != _FORMAT:
        raise SealBroken("not a sealed cache entry of this version")
    if "payload" not in document:
        raise SealBroken("holds no payload")
    try:
        digest = payload_digest(document["payload"])
    except ValueError:
        raise SealBroken("holds values JSON cannot hold") from None
    if document.get("sha256") != digest:
        raise SealBroken("its content does not match its digest (damaged or edited)")
    if document.get("key") != key:
        raise SealBroken("holds another entry's data")
    return document["payload"]


def read_sealed(
    path: Path, key: str, *, what: str, quiet: bool = False, again: str = "computed again"
) -> Any | None:
    """The payload of the sealed entry at ``path`` for ``key``; None when there is none, or (with
    one `CacheWarning` line naming the file and why, ending in ``again``, unless ``quiet``: the
    caller said so already) when it cannot be trusted."""
    from retrieval_gate.files.read import read_text

    if not path.exists():
        return None
    try:
        return unseal(read_text(path, what=what), key)
    except (SealBroken, RetrievalGateError) as exc:
        # An entry of an earlier version is stale, not damaged: computed again, unsaid (an
        # upgrade would otherwise warn once per shard).
        if quiet or isinstance(exc, NotSealed):
            return None
        reason = exc.message if isinstance(exc, RetrievalGateError) else str(exc)
        warnings.warn(f"{what} {path} was not used: {reason}; {again}", CacheWarning, stacklevel=2)
        return None


def write_sealed(path: Path, key: str, payload: Any) -> None:
    """Write ``payload`` sealed under ``key`` to ``path``, whole or not at all. Raises OSError
    when it cannot be written."""
    from retrieval_gate.files.atomic import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, seal(key, payload))


def file_digest(path: Path) -> str:
    """sha256 of the file at ``path``, read in blocks. Raises OSError when it cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_files_record(record: Path, key: str, files: Sequence[Path], extra: Any = None) -> None:
    """Seal ``files`` (each inside ``record``'s folder, named relative to it) under ``key``: the
    record holds every file's sha256 and ``extra``. Written last, once the files are complete,
    so a record that exists vouches for whole files. Raises OSError when it cannot be written."""
    names = {file.relative_to(record.parent).as_posix(): file_digest(file) for file in files}
    write_sealed(record, key, {"files": dict(sorted(names.items())), "extra": extra})


#: Files records this process checked, by path: the stat signature of the record and its files
#: when checked, and what the check gave. A record read again (a search per query batch asks for
#: the build id) is hashed again only when a file changed since (1.6 GB of graph for 1M vectors).
_CHECKED: dict[Path, tuple[tuple[tuple[int, int, int], ...], list[Any]]] = {}


def _signature(paths: Sequence[Path]) -> tuple[tuple[int, int, int], ...] | None:
    try:
        stats = [path.stat() for path in paths]
    except OSError:
        return None
    return tuple((st.st_ino, st.st_size, st.st_mtime_ns) for st in stats)


def check_files_record(record: Path, key: str, *, what: str, again: str) -> Any | None:
    """The ``extra`` of the files record at ``record`` for ``key`` (:func:`write_files_record`),
    as a one-item list ``[extra]`` so that None stays a value; None, unsaid, when there is no
    record (files written before records were kept, or never finished), and None with one
    `CacheWarning` line naming the record or the file, ending in ``again``, when the record or a
    file it lists cannot be trusted."""
    if not record.exists():
        _CHECKED.pop(record, None)
        return None
    payload = read_sealed(record, key, what=f"{what} record", again=again)
    if payload is None:
        _CHECKED.pop(record, None)
        return None
    files = payload.get("files") if isinstance(payload, dict) else None
    if not isinstance(files, dict):
        warnings.warn(
            f"{what} record {record} was not used: it lists no files; {again}",
            CacheWarning,
            stacklevel=2,
        )
        return None
    paths = [record, *(record.parent / str(name) for name in files)]
    signature = _signature(paths)
    known = _CHECKED.get(record)
    if known is not None and signature is not None and known[0] == signature:
        return known[1]
    for name, digest in files.items():
        path = record.parent / str(name)
        try:
            found = file_digest(path)
        except OSError as exc:
            reason = f"it cannot be read ({exc.strerror or exc})"
        else:
            if found == digest:
                continue
            reason = f"its content does not match the digest in {record.name} (damaged or edited)"
        _CHECKED.pop(record, None)
        warnings.warn(f"{what} {path} was not used: {reason}; {again}", CacheWarning, stacklevel=2)
        return None
    result = [payload.get("extra")]
    if signature is not None:
        _CHECKED[record] = (signature, result)
    return result
