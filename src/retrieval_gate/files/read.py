"""The one way in: every file the plugin reads from the user passes through here.

Suites, settings, corpora, run files, ontologies, extraction documents, pair files, caches and
baselines are read with :func:`read_bytes` / :func:`read_text`, and YAML / JSON parsed with
:func:`parse_structured`. What that guarantees, whichever file it is:

* **Regular files only.** The file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on
  the open descriptor (no window between a check and the open): a named pipe, socket, device or
  folder is refused at once, where reading it would wait for a writer forever (a FIFO) or never
  end (``/dev/zero``).
* **A size limit.** A file larger than ``max_file_mb`` (a ``[tool.retrieval_gate]`` setting,
  default :data:`DEFAULT_MAX_FILE_MB`; ``0`` means no limit) is refused before it is read, by its
  size on disk; a ``.gz`` file is held to the same limit once decompressed (a small archive that
  expands to gigabytes is refused, not unpacked).
* **Text.** UTF-8, a leading byte-order mark dropped (a UTF-8 BOM is what Windows editors write;
  left in, it would become part of the first query id or document id). A file that is not UTF-8,
  or holds NUL bytes (a binary file), is refused naming the line and the offset.
* **Structure.** YAML is loaded safely and strictly (a key given twice is an error,
  :mod:`retrieval_gate.files.structured`); JSON's ``NaN`` / ``Infinity`` are refused; nesting
  deeper than :data:`MAX_DEPTH` and documents that expand to more than :data:`MAX_VALUES` values
  (YAML aliases can make a few lines expand exponentially) are refused, before anything walks
  them.

Every refusal is the caller's :class:`~retrieval_gate.errors.RetrievalGateError` subclass (a
suite's is a ``SuiteError``, a run file's a ``RunError``), naming the path and, where there is
one, the entry: a one-line message, never a traceback. Standard library only (YAML is imported
when a YAML file is parsed).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Literal

from retrieval_gate.errors import RetrievalGateError

__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "MAX_DEPTH",
    "MAX_VALUES",
    "check_regular",
    "configure",
    "max_file_bytes",
    "open_regular",
    "parse_structured",
    "read_bytes",
    "read_structured",
    "read_text",
    "special_kind",
]

#: Files larger than this many MiB are refused unless ``max_file_mb`` says otherwise.
DEFAULT_MAX_FILE_MB = 1024
#: The deepest nesting of lists and mappings a YAML or JSON file may have.
MAX_DEPTH = 100
#: The most values (scalars, lists, mappings, counted as expanded) one YAML or JSON file may hold.
MAX_VALUES = 20_000_000

_MIB = 1 << 20
_max_bytes: int | None = DEFAULT_MAX_FILE_MB * _MIB
#: Bytes read through :func:`read_bytes` and :func:`tail_lines` in this process (a test counts
#: what a step read: an entry appended to a long history reads none of it).
_read_total = 0


def bytes_read() -> int:
    """The bytes this process has read through this door's readers so far."""
    return _read_total


Error = type[RetrievalGateError]


def configure(max_file_mb: float | None) -> None:
    """Set the size limit for the session (``None`` restores the default, ``0`` is no limit)."""
    global _max_bytes
    if max_file_mb is None:
        _max_bytes = DEFAULT_MAX_FILE_MB * _MIB
    else:
        _max_bytes = None if max_file_mb == 0 else int(max_file_mb * _MIB)


def max_file_bytes() -> int | None:
    """The size limit in bytes now in force, None when there is none."""
    return _max_bytes


_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


def special_kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file, as words."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", _MIB), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _limit(limit: int) -> str:
    """The size limit as messages say it: whole MB as set, else its bytes (a limit of a
    fraction of a MB is not "0 MB")."""
    return f"{limit // _MIB} MB" if limit >= _MIB and not limit % _MIB else _size(limit)


def _too_large(size: int, what: str, path: Path, entry: str | None, error: Error) -> Exception:
    limit = _max_bytes or 0
    return error(
        f"{what} is {_size(size)}, over the {_limit(limit)} limit on files the gate reads "
        "(raise 'max_file_mb' in the settings; 0 for no limit)",
        path=path,
        entry=entry,
    )


def _reason(exc: OSError) -> str:
    # OSError's str() repeats the path; the error names it already.
    if exc.errno == errno.ELOOP:
        return "it is a loop of symbolic links (each leads back to another)"
    return exc.strerror or str(exc)


def _not_found(what: str, path: Path) -> str:
    """The words for a missing ``path``: for a link whose target is missing (which ``ls``
    still lists), where it leads."""
    if path.is_symlink():
        return f"{what} is a symbolic link to {os.readlink(path)}, which does not exist"
    return f"{what} not found"


def check_regular(
    path: Path, *, what: str, error: Error = RetrievalGateError, entry: str | None = None
) -> os.stat_result:
    """``path``'s status when it is a regular file (symlinks followed), else ``error``."""
    try:
        status = path.stat()
    except FileNotFoundError:
        raise error(f"{what} not found", path=path, entry=entry) from None
    except OSError as exc:
        raise error(f"cannot read {what}: {_reason(exc)}", path=path, entry=entry) from None
    kind = special_kind(status.st_mode)
    if kind is not None:
        raise error(f"{what} is {kind}, not a regular file", path=path, entry=entry)
    return status


def read_bytes(
    path: Path,
    *,
    what: str,
    error: Error = RetrievalGateError,
    entry: str | None = None,
    gzip: bool = False,
) -> bytes:
    """The bytes of the regular file ``path``, within the size limit (see the module docstring).

    With ``gzip`` the file is decompressed, and the limit holds for the decompressed bytes.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(_not_found(what, path), path=path, entry=entry) from None
    except IsADirectoryError:
        raise error(f"{what} is a folder, not a regular file", path=path, entry=entry) from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing only
            raise error(f"{what} is not a regular file", path=path, entry=entry) from None
        raise error(f"cannot read {what}: {_reason(exc)}", path=path, entry=entry) from None
    try:
        status = os.fstat(fd)
        kind = special_kind(status.st_mode)
        if kind is not None:
            raise error(f"{what} is {kind}, not a regular file", path=path, entry=entry)
        limit = _max_bytes
        if limit is not None and status.st_size > limit:
            raise _too_large(status.st_size, what, path, entry, error)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if limit is None else handle.read(limit + 1)
        global _read_total
        _read_total += len(data)
    except OSError as exc:
        raise error(f"cannot read {what}: {_reason(exc)}", path=path, entry=entry) from None
    finally:
        os.close(fd)
    if limit is not None and len(data) > limit:  # a file that grew, or one stat cannot size
        raise _too_large(len(data), what, path, entry, error)
    if gzip:
        data = _gunzip(data, limit, what, path, entry, error)
    return data


def open_regular(
    path: Path, *, what: str, error: Error = RetrievalGateError, entry: str | None = None
) -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file (else ``error``), with
    no size limit: for the plugin's own cache files, which may be large, read as streams."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"cannot read {what}: {_reason(exc)}", path=path, entry=entry) from None
    try:
        kind = special_kind(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise error(f"cannot read {what}: {_reason(exc)}", path=path, entry=entry) from None
    if kind is not None:
        os.close(fd)
        raise error(f"{what} is {kind}, not a regular file", path=path, entry=entry)
    return os.fdopen(fd, "rb")


#: How much :func:`tail_lines` reads at a time, from the end of the file back.
TAIL_BLOCK = 1 << 20


def tail_lines(
    path: Path, *, what: str, error: Error = RetrievalGateError
) -> Iterator[tuple[bytes, bool]]:
    """The lines of the regular file ``path``, the last first, read from its end back a block
    at a time (:data:`TAIL_BLOCK`), so a reader that needs the newest lines of a long file
    reads only them. Each is ``(line without its newline, torn)``: ``torn`` for a last line
    with no newline (a write cut short). A line longer than ``max_file_mb`` is refused
    (``error``): lines are read whole. Stops when the caller stops iterating."""
    global _read_total
    from collections import deque

    limit = _max_bytes
    with open_regular(path, what=what, error=error) as handle:
        fd = handle.fileno()
        position = os.fstat(fd).st_size
        rest: deque[bytes] = deque()  # the line being read, its chunks in the file's order
        rest_size = 0
        last = True  # the next line completed is the file's last
        while position > 0:
            step = min(TAIL_BLOCK, position)
            position -= step
            block = os.pread(fd, step, position)
            _read_total += len(block)
            cut = block.rfind(b"\n")
            if cut < 0:
                rest.appendleft(block)
                rest_size += len(block)
                if limit is not None and rest_size > limit:
                    raise _too_large(rest_size, f"a line of {what}", path, None, error)
                continue
            line = block[cut + 1 :] + b"".join(rest)
            if not (last and line == b""):  # a file ending with a newline has no line after it
                yield line, last
            last = False
            parts = block[:cut].split(b"\n")
            for part in reversed(parts[1:]):
                yield part, False
            rest = deque([parts[0]])
            rest_size = len(parts[0])
        line = b"".join(rest).removeprefix(b"\xef\xbb\xbf")  # a byte-order mark opens no line
        if line:
            yield line, last


def count_lines(path: Path, *, what: str, error: Error = RetrievalGateError) -> int:
    """How many lines the regular file ``path`` has (a last line without its newline counts),
    counted in blocks without keeping them: to name a line found from the end by its number."""
    global _read_total
    lines, last = 0, b"\n"
    with open_regular(path, what=what, error=error) as handle:
        while block := handle.read(TAIL_BLOCK):
            _read_total += len(block)
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def _gunzip(
    data: bytes, limit: int | None, what: str, path: Path, entry: str | None, error: Error
) -> bytes:
    import gzip as gz
    import io
    import zlib

    try:
        with gz.GzipFile(fileobj=io.BytesIO(data)) as handle:
            out = handle.read() if limit is None else handle.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise error(f"cannot read {what}: {exc}", path=path, entry=entry) from None
    if limit is not None and len(out) > limit:
        raise error(
            f"{what} decompresses to more than the {_limit(limit)} limit on files the gate "
            "reads (raise 'max_file_mb' in the settings; 0 for no limit)",
            path=path,
            entry=entry,
        )
    return out


def decode(data: bytes, *, what: str, path: Path, error: Error = RetrievalGateError) -> str:
    """UTF-8 text without a leading byte-order mark; NUL bytes (a binary file) refused."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        raise error(
            f"not UTF-8 text (byte 0x{data[start]:02x} at offset {start}); convert it to "
            "UTF-8, or move it away if it is binary",
            path=path,
            entry=f"line {line}",
        ) from None
    nul = text.find("\x00")
    if nul >= 0:
        offset = len(text[:nul].encode("utf-8"))
        line = text.count("\n", 0, nul) + 1
        raise error(
            f"not text (a NUL byte at offset {offset}): a binary file; move it away",
            path=path,
            entry=f"line {line}",
        )
    return text


def read_text(
    path: Path,
    *,
    what: str,
    error: Error = RetrievalGateError,
    entry: str | None = None,
    gzip: bool = False,
) -> str:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_bytes` and :func:`decode`)."""
    data = read_bytes(path, what=what, error=error, entry=entry, gzip=gzip)
    return decode(data, what=what, path=path, error=error)


Format = Literal["yaml", "json"]


def read_structured(
    path: Path,
    *,
    what: str,
    error: Error = RetrievalGateError,
    format: Format | None = None,
) -> Any:
    """A YAML or JSON file (by ``format``, else ``.json`` is JSON and anything else YAML),
    read through :func:`read_text` and parsed with :func:`parse_structured`."""
    text = read_text(path, what=what, error=error)
    if format is None:
        format = "json" if path.suffix.lower() == ".json" else "yaml"
    return parse_structured(text, format=format, path=path, error=error)


def parse_structured(
    text: str,
    *,
    format: Format,
    path: Path,
    error: Error = RetrievalGateError,
    entry: str | None = None,
    strict: bool = True,
    constants: bool = False,
) -> Any:
    """Parse YAML (safely, strictly) or JSON into plain data, or raise ``error`` naming the line.

    Refused: syntax errors, a key given twice (unless ``strict`` is false: a corpus line, where
    the fast parser matters more), JSON's ``NaN`` and ``Infinity``, integers with more digits
    than Python converts, nesting deeper than :data:`MAX_DEPTH`, and more than
    :data:`MAX_VALUES` values once YAML aliases are expanded. With ``constants``, JSON's NaN and
    Infinity are read as floats, for a caller that checks every number itself and can then name
    the entry that holds one (a baseline).
    """
    from retrieval_gate.files.structured import DuplicateKeyError, load_json, load_yaml

    def fail(message: str) -> Exception:
        return error(message, path=path, entry=entry)

    if format == "json":
        import json

        from retrieval_gate.files.structured import nested_deeper

        if nested_deeper(text, MAX_DEPTH):  # before the parser recurses as deep as the text
            raise fail(f"nested more than {MAX_DEPTH} levels deep; flatten it")
        try:
            constant = None if constants else _no_constant
            if strict:
                data = load_json(text, parse_constant=constant)
            else:
                data = json.loads(text, parse_constant=constant)
        except json.JSONDecodeError as exc:
            # A line of a JSONL file is its entry already: the column is what is left to say.
            line = "" if entry is not None and exc.lineno == 1 else f"line {exc.lineno}, "
            raise fail(f"invalid JSON at {line}column {exc.colno}: {exc.msg}") from None
        except DuplicateKeyError as exc:
            raise fail(str(exc)) from None
        except _ConstantError as exc:
            raise fail(f"invalid JSON: {exc.name} is not a JSON number") from None
        except RecursionError:
            raise fail(f"nested more than {MAX_DEPTH} levels deep; flatten it") from None
        except ValueError as exc:  # an integer of thousands of digits
            raise fail(f"invalid JSON: {_value_problem(exc)}") from None
    else:
        import yaml

        try:
            data = load_yaml(text)
        except DuplicateKeyError as exc:
            raise fail(str(exc)) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
            raise fail(f"invalid YAML{where}: {problem}") from None
        except RecursionError:
            raise fail(f"nested more than {MAX_DEPTH} levels deep; flatten it") from None
        except ValueError as exc:  # an integer of thousands of digits
            raise fail(f"invalid YAML: {_value_problem(exc)}") from None
    problem = check_shape(data)
    if problem is not None:
        raise fail(problem)
    # A lone surrogate can only come from an escape (\ud800 in JSON or a double-quoted YAML
    # string; the text itself is strict UTF-8): look only when the text has one.
    if "\\u" in text or "\\U" in text:
        found = lone_surrogate(data)
        if found is not None:
            where, value = found
            shown = repr(value if len(value) <= 60 else value[:60] + "...")
            raise error(
                f"{shown} holds a lone surrogate (an escape such as \\ud800 "
                "with no pair), which is not a character and cannot be written as text; write "
                "the character itself or a complete pair",
                path=path,
                entry=_escaped(where if entry is None else f"{entry} {where}".rstrip()),
            )
    return data


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(data: Any) -> tuple[str, str] | None:
    """The entry (``queries[2].id``) and the string of the first lone surrogate in ``data``
    (parsed YAML or JSON, already measured by :func:`check_shape`), or None. Keys count as
    strings too; the entry of the data itself is the empty string."""
    stack: list[tuple[Any, str]] = [(data, "")]
    seen: set[int] = set()
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where, node
        elif isinstance(node, (dict, list)) and id(node) not in seen:
            seen.add(id(node))  # a YAML alias is looked at once
            if isinstance(node, dict):
                items = list(node.items())
                for key, value in reversed(items):
                    name = f"{where}.{key}" if where else str(key)
                    stack.append((value, name))
                    stack.append((key, name))
            else:
                stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(node))))
    return None


def _escaped(text: str) -> str:
    """``text`` with each surrogate written as its escape: it cannot be encoded to be shown."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _value_problem(exc: ValueError) -> str:
    if "digits" in str(exc):
        return f"an integer has more than {sys.get_int_max_str_digits()} digits"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class _ConstantError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _no_constant(name: str) -> Any:
    raise _ConstantError(name)


def check_shape(
    data: Any, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES
) -> str | None:
    """Why ``data`` (parsed YAML or JSON) is too deep or too large, or None when it is not.

    Each list and mapping is measured once (by identity), so a YAML alias bomb (a "billion
    laughs") is measured in the time of its few lines, never expanded; a structure that contains
    itself (a recursive YAML alias) is too deep.
    """
    deep = f"nested more than {max_depth} levels deep; flatten it"
    measured: dict[int, tuple[int, int]] = {}  # id -> (height, expanded values)
    # An explicit stack (the walk itself must not recurse as deep as the data) of (node, depth,
    # its containers once visited, else None).
    containers = (list, dict)
    if not isinstance(data, containers):
        return None
    stack: list[tuple[Any, int, list[Any] | None]] = [(data, 1, None)]
    while stack:
        node, depth, inner = stack.pop()
        if inner is None:
            known = measured.get(id(node))
            if known is not None:
                if depth + known[0] - 1 > max_depth:
                    return deep
                continue
            children = (*node.keys(), *node.values()) if isinstance(node, dict) else node
            inner = [child for child in children if isinstance(child, containers)]
            stack.append((node, depth, inner))
            if inner:
                if depth >= max_depth:
                    return deep
                stack.extend((child, depth + 1, None) for child in inner)
            continue
        height, values = (
            1,
            1 + (2 * len(node) if isinstance(node, dict) else len(node)) - len(inner),
        )
        for child in inner:
            h, v = measured[id(child)]
            height = max(height, h + 1)
            values += v
        if values > max_values:
            return (
                f"expands to more than {max_values:,} values (YAML aliases repeated?); "
                "split or simplify it"
            )
        measured[id(node)] = (height, values)
    return None
