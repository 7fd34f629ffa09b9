"""Embedders: turn documents and queries into unit vectors.

`load_embedder(spec, cache_dir=...)` picks a backend by `spec.kind` and imports it lazily, so this
module (and the plugin entry point) loads without torch. A model reference may be a local folder,
an installed package that ships a model (`get_model_path()`), or a Hugging Face hub id; see
`resolve_model_ref`.

Every embedder carries an `identity`: a string naming the model files and the settings that shape
its vectors. It keys the embedding cache and the chroma collections, so it is built only from
things that are the same on every machine with the same install (never absolute paths or times).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from retrieval_gate.errors import ConfigError, MissingExtraError, RunError
from retrieval_gate.progress import task
from retrieval_gate.records import counted
from retrieval_gate.registry import Registry, package_modules
from retrieval_gate.schema import OptionTable, Where, parse_options
from retrieval_gate.usercode import PluginLoadError

__all__ = [
    "CANONICAL_ROWS",
    "EMBEDDERS",
    "EMBEDDER_KINDS",
    "ENTRY_POINT_GROUP",
    "Embedder",
    "EmbedderBackend",
    "EmbedderSpec",
    "LazyEmbedder",
    "ResolvedModel",
    "canonical_batches",
    "encode_in_chunks",
    "folder_digest",
    "import_optional",
    "known_dim",
    "load_embedder",
    "make_identity",
    "model_loaded",
    "open_embedder",
    "probe_hub",
    "register_embedder",
    "resolve_model_ref",
    "spec_identity",
    "torch_device",
]

IDENTITY_VERSION = "retrieval-gate-embedder/1"

# Files at most this big are hashed whole; bigger ones (weights) are sampled, see _file_fingerprint.
_SMALL_FILE = 1 << 20
_SAMPLE_BLOCK = 1 << 16
_SAMPLE_COUNT = 16


@dataclass(frozen=True)
class EmbedderSpec:
    """What to load: backend kind, model reference, the settings every embedder shares, and the
    backend's own options (``backend_options``: declared by its option table, such as model2vec's
    ``distill_from`` and ``pca_dims`` or sentence-transformers' ``backend``; checked, with the
    defaults filled in, when the embedder is opened)."""

    kind: str
    model: str
    query_prompt: str = ""
    document_prompt: str = ""
    normalize: bool = True
    batch_size: int = 64
    device: str = "cpu"
    # Not hashed (a dict is not hashable; specs that differ only here still compare unequal).
    # Never changed after construction.
    backend_options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def option(self, name: str) -> Any:
        """The backend's own option ``name``: as given, else its default in the backend's option
        table."""
        if name in self.backend_options:
            return self.backend_options[name]
        return EMBEDDERS[self.kind].options[name].default


@runtime_checkable
class Embedder(Protocol):
    """A loaded model. Outputs are float32 `[n, dim]`, L2-normalised when the spec asks for it."""

    identity: str

    @property
    def dim(self) -> int: ...

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray: ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model reference points.

    `name` is a stable label (package name, hub id or folder name) that goes into identities;
    `path` is the local folder, or None for a hub id the backend library has to fetch or find
    in its own cache.
    """

    ref: str
    name: str
    path: Path | None


def import_optional(module: str, *, package: str, extra: str) -> ModuleType:
    """Import an optional dependency or raise `MissingExtraError` saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = f"pip install 'pytest-retrieval-gate[{extra}]'"
        top = module.split(".")[0]
        # "Not installed" only when it is not there: an installed package that fails to import
        # (a broken dependency, an extension module loaded twice) says so.
        if exc.name in (module, top) or (
            exc.name is None and importlib.util.find_spec(top) is None
        ):
            raise MissingExtraError(f"{package} is not installed; {hint}") from exc
        # The package is there but one of its own dependencies is broken or missing.
        raise MissingExtraError(f"{package} could not be imported ({exc}); {hint}") from exc
    except Exception as exc:
        # Installed, and broken on import in another way (built against another numpy, a bad
        # setting read at import): the user's environment, said in one line, not a traceback.
        reason = str(exc).splitlines()[0] if str(exc) else ""
        raise MissingExtraError(
            f"{package} is installed but could not be imported ({type(exc).__name__}: "
            f"{reason}); repair or reinstall it (pip install --force-reinstall {package})"
        ) from exc


def _looks_like_path(ref: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else that is not an existing folder is a
    # path the user expected to exist, and deserves "not found" rather than a hub lookup.
    return (
        ref.startswith((".", "/", "~")) or "\\" in ref or os.path.isabs(ref) or ref.count("/") > 1
    )


def resolve_model_ref(ref: str, *, entry: str | None = None) -> ResolvedModel:
    """Resolve a model reference: local folder, installed model package, or hub id.

    Order: an existing path wins; then an importable package (``-`` read as ``_``) that has a
    ``get_model_path()``; then anything shaped like ``name`` or ``org/name`` is a hub id. A
    reference that looks like a path but does not exist is a `ConfigError`.
    """
    ref = ref.strip()
    if not ref:
        raise ConfigError("no model given", entry=entry)
    path = Path(ref).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"model path '{ref}' is a file; give the model's folder", entry=entry)
        resolved = path.resolve()
        return ResolvedModel(ref=ref, name=resolved.name, path=resolved)

    module_name = ref.replace("-", "_")
    if all(part.isidentifier() for part in module_name.split(".")):
        try:
            found = importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                raise ConfigError(
                    f"model package '{module_name}' failed to import: {exc}", entry=entry
                ) from exc
            getter = getattr(module, "get_model_path", None)
            if callable(getter):
                model_path = Path(getter())
                if not model_path.is_dir():
                    raise ConfigError(
                        f"model package '{module_name}' points at '{model_path}', "
                        "which is not a folder",
                        entry=entry,
                    )
                return ResolvedModel(ref=ref, name=module_name, path=model_path.resolve())

    if _looks_like_path(ref):
        raise ConfigError(
            f"model '{ref}' not found: no such folder and no installed package of that name",
            entry=entry,
        )
    return ResolvedModel(ref=ref, name=ref, path=None)


def torch_device(device: str) -> str:
    """The torch device for a ``device`` setting: ``auto`` is CUDA when torch sees a GPU, else
    Apple's MPS when available, else the CPU; anything else as given. Imports torch only for
    ``auto`` and a CUDA device, which must exist: torch's own error ("Torch not compiled with
    CUDA enabled") names neither the setting nor a way out."""
    if device.partition(":")[0] == "cuda":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            seen = counted(count, "CUDA device") if count else "no CUDA device"
            raise ConfigError(
                f"device {device!r} is not available: torch sees {seen} on this machine; "
                'set device = "cpu", or "auto" for a GPU where there is one'
            )
        return device
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def hub_offline() -> bool:
    """True when the user asked the Hugging Face libraries never to touch the network."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


#: Seconds one look-up on the hub may take before the hub counts as unreachable.
HUB_PROBE_TIMEOUT_S = 10.0


def probe_hub(repo_ids: Sequence[str], *, what: str, entry: str | None = None) -> list[str]:
    """The hub ids among ``repo_ids`` that exist on the Hugging Face hub, asked once each.

    Called before a download, when the model is neither local nor in the cache: the libraries'
    own download retries for minutes when a name does not exist or the network is down. One
    metadata request each, with a short timeout (``HUB_PROBE_TIMEOUT_S``), decides instead: none
    exists is a ``ConfigError`` "not found locally nor on the hub"; the hub not answering is a
    ``ConfigError`` "not found locally and the hub could not be reached". A gated or private
    repository counts as existing (the download then says what access it needs). Without
    huggingface_hub installed every id is returned unchecked.
    """
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:
        return list(repo_ids)
    from retrieval_gate.usercode import CallTimeout, call_bounded

    api = HfApi()
    found: list[str] = []
    unreachable: str | None = None
    for repo_id in repo_ids:
        try:
            # huggingface_hub's timeout is per read: the look-up is given it whole, from outside
            # (the thread past it is abandoned, a daemon).
            call_bounded(
                functools.partial(api.model_info, repo_id, timeout=HUB_PROBE_TIMEOUT_S),
                HUB_PROBE_TIMEOUT_S,
            )
        except CallTimeout:
            unreachable = unreachable or f"no answer within {HUB_PROBE_TIMEOUT_S:g} s"
        except GatedRepoError:
            found.append(repo_id)
        except RepositoryNotFoundError:
            continue
        except Exception as exc:  # network, DNS, proxy, HTTP 5xx: the hub did not answer
            unreachable = unreachable or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        else:
            found.append(repo_id)
    if found:
        return found
    names = " or ".join(f"'{r}'" for r in repo_ids)
    if unreachable is not None:
        raise ConfigError(
            f"{what}: not found locally (no such folder, installed package or Hugging Face cache "
            f"entry) and the hub could not be reached to look for {names} ({unreachable}); give "
            "a local path or an installed model package, or check the network",
            entry=entry,
        )
    raise ConfigError(
        f"{what}: no such folder, installed package or Hugging Face hub model ({names}); "
        "check the name",
        entry=entry,
    )


def hub_candidates(ref: str) -> list[str]:
    """Hub ids the library would try for `ref`: bare names live under sentence-transformers/."""
    return [ref] if "/" in ref else [ref, f"sentence-transformers/{ref}"]


def cached_hub_folder(repo_ids: Sequence[str]) -> Path | None:
    """The local snapshot of the first hub id already in the Hugging Face cache, or None.

    Never touches the network (``local_files_only``), so a cached model loads offline and its
    files can be digested for the identity.
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    for repo_id in repo_ids:
        try:
            return Path(snapshot_download(repo_id, local_files_only=True))
        except Exception:
            continue
    return None


def _file_fingerprint(path: Path, size: int) -> bytes:
    # Whole-file hashing of multi-GB weights would cost seconds per load; a fine-tune changes
    # nearly every byte, so evenly spaced samples catch it while reading ~1 MiB.
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        if size <= _SMALL_FILE:
            digest.update(fh.read())
        else:
            span = size - _SAMPLE_BLOCK
            for i in range(_SAMPLE_COUNT):
                fh.seek(span * i // (_SAMPLE_COUNT - 1))
                digest.update(fh.read(_SAMPLE_BLOCK))
    return digest.digest()


def _model_files(folder: Path) -> Iterator[tuple[str, Path]]:
    for root, dirs, files in os.walk(folder):
        # Hidden folders (.git, .cache) and byte code vary between installs of the same model.
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in files:
            if name.startswith(".") or name.endswith((".md", ".pyc", ".lock")):
                continue
            full = Path(root) / name
            if full.is_file():
                yield full.relative_to(folder).as_posix(), full


def folder_digest(folder: Path) -> str:
    """Digest of a model folder: relative file names, sizes and (sampled) contents.

    Independent of where the folder lives and of file times, so two machines with the same
    install agree. READMEs and hidden files are left out: they do not change the vectors and
    differ between a hub download and a packaged copy.
    """
    digest = hashlib.sha256()
    for rel, full in sorted(_model_files(folder)):
        size = full.stat().st_size
        digest.update(f"{rel}\0{size}\0".encode())
        digest.update(_file_fingerprint(full, size))
    return digest.hexdigest()[:20]


def make_identity(**fields: Any) -> str:
    """Identity string: a version tag and the fields as sorted JSON (readable, unambiguous)."""
    return f"{IDENTITY_VERSION} {json.dumps(fields, sort_keys=True, separators=(',', ':'))}"


def spec_identity(spec: EmbedderSpec, **fields: Any) -> str:
    """`make_identity` of ``fields`` and the spec's prompts and normalisation, which every
    built-in embedder's identity holds."""
    return make_identity(
        **fields,
        query_prompt=spec.query_prompt,
        document_prompt=spec.document_prompt,
        normalize=spec.normalize,
    )


def _progress_bar(total: int, desc: str) -> Any:
    # Through the session's sink, which writes around pytest's capture (retrieval_gate.progress).
    return task(desc, total)


#: Rows of every document batch of the local transformer backends (sentence-transformers' torch
#: path, ONNX, OpenVINO): one shape per token length, whatever ``batch_size`` says, so a
#: document's vector depends on its text alone (`canonical_batches`).
CANONICAL_ROWS = 8


def canonical_batches(
    lengths: Sequence[int], rows: int = CANONICAL_ROWS
) -> Iterator[tuple[list[int], int]]:
    """Batches of one fixed shape per token length over texts of token counts ``lengths``:
    ``(positions, filler)``, ``rows`` positions of equal length, the last batch of a length
    short by ``filler`` rows (the caller fills them with copies of its last text and drops
    their vectors). Lengths in increasing order, positions in the order given. ``rows = 1``
    for models whose vector depends on the other texts of its batch whatever its shape (int8
    dynamic quantization scales activations by the whole batch's range).

    Which texts share an encoder call depends on which ones the cache lacked, on progress
    chunks and on ``batch_size``; a padded batch moves the last bits of a vector (attention and
    pooling run over other shapes), and so does a batch of another size (the matrix kernels
    block by shape: MiniLM gave two 5-token texts other bits in a batch of 2 than alone, and
    onnxruntime does the same). With no padding and one shape per length, a text's vector
    depends on the text alone (tests/embed/test_embed.py, tests/embed/test_onnx.py). The cost:
    at most ``CANONICAL_ROWS - 1`` filler rows per distinct length.
    """
    groups: dict[int, list[int]] = {}
    for position, length in enumerate(lengths):
        groups.setdefault(length, []).append(position)
    for _, positions in sorted(groups.items()):
        for start in range(0, len(positions), rows):
            part = positions[start : start + rows]
            yield part, rows - len(part)


def encode_in_chunks(
    encode: Callable[[list[str]], np.ndarray],
    texts: Sequence[str],
    *,
    dim: int,
    normalize: bool,
    chunk_size: int,
    progress: bool = False,
    desc: str = "embedding",
) -> np.ndarray:
    """Run `encode` over `texts` in chunks and return checked float32 `[n, dim]` rows.

    Rows are L2-normalised here when asked (zero rows stay zero) so both backends behave the
    same. Non-finite rows stay non-finite: the embedding boundary (embed/checks.py) refuses them
    with the one documented line naming the system and the text, as for every embedder.
    """
    if len(texts) == 0:
        return np.zeros((0, dim), dtype=np.float32)
    bar = _progress_bar(len(texts), desc) if progress else None
    # Filled chunk by chunk: a million vectors cost their own size, not a list of parts and a
    # concatenated copy besides.
    out = np.empty((len(texts), dim), dtype=np.float32)
    try:
        for start in range(0, len(texts), chunk_size):
            chunk = [str(t) for t in texts[start : start + chunk_size]]
            part = np.asarray(encode(chunk), dtype=np.float32)
            if part.ndim != 2 or part.shape != (len(chunk), dim):
                raise RunError(
                    f"embedder returned shape {part.shape} for {counted(len(chunk), 'text')}, "
                    "expected "
                    f"({len(chunk)}, {dim})"
                )
            if normalize:
                norms = np.linalg.norm(part, axis=1, keepdims=True)
                # A non-finite row is left as it is, for the boundary to refuse (inf / inf warns).
                np.divide(part, norms, out=part, where=(norms > 0) & np.isfinite(norms))
            out[start : start + len(chunk)] = part
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return out


@dataclass(frozen=True)
class EmbedderBackend:
    """An embedder by name: the pip extra that installs it, the system keys only it takes
    (beyond the keys every embedding system has), and its loader, which imports the backend
    library only when called: ``load(spec, cache_dir, entry)``."""

    name: str
    extra: str
    options: OptionTable
    load: Callable[[EmbedderSpec, Path, str | None], Embedder]
    summary: str
    #: ``identify(spec, cache_dir, entry)``: the identity ``load`` would give, worked out from
    #: the model's files without importing the backend library, or None when it cannot be
    #: known before loading (a hub model not downloaded yet). Lets a warm run skip the load.
    identify: Callable[[EmbedderSpec, Path, str | None], str | None] | None = None
    #: The backend's own option that makes the model in place of ``model`` (model2vec's
    #: ``distill_from``): a system then gives one of the two; None: it needs ``model``.
    makes_model: str | None = None
    #: ``check(options, where)``: checks of the system's parsed options the table cannot
    #: express (across keys), raising a ``ConfigError`` naming the system.
    check: Callable[[Mapping[str, Any], Where], None] | None = None
    #: Keys every embedding system has that mean nothing for this backend, each with why (the
    #: http embedder's ``device``: the service picks it): a system giving one is refused.
    not_applicable: Mapping[str, str] = field(default_factory=dict)


ENTRY_POINT_GROUP = "retrieval_gate.embedders"

#: Embedders by name, in registration order; "unknown embedder" lists these keys. Each built-in
#: is the ``BACKEND`` of a module of this package (``ORDER`` orders them), loaded on the first
#: look-up; then the ``retrieval_gate.embedders`` entry points; then `register_embedder`.
EMBEDDERS: Registry[EmbedderBackend] = Registry(
    "embedder backend",
    kind=EmbedderBackend,
    attr="BACKEND",
    group=ENTRY_POINT_GROUP,
    builtins=lambda: package_modules(__name__, "BACKEND"),
    error=PluginLoadError,
    replace=True,
)


class _Extras(Mapping[str, str]):
    """Embedder names and the pip extra that installs each: a view of `EMBEDDERS`."""

    def __getitem__(self, name: str) -> str:
        return EMBEDDERS[name].extra

    def __iter__(self) -> Iterator[str]:
        return iter(EMBEDDERS)

    def __len__(self) -> int:
        return len(EMBEDDERS)


#: Embedder names and the pip extra that installs each backend.
EMBEDDER_KINDS: Mapping[str, str] = _Extras()


def register_embedder(backend: EmbedderBackend) -> EmbedderBackend:
    """Add an embedder backend (a third-party package calls this when it is loaded, or names it
    in the ``retrieval_gate.embedders`` entry-point group)."""
    return EMBEDDERS.register(backend)


def _backend(spec: EmbedderSpec, entry: str | None) -> tuple[EmbedderBackend, EmbedderSpec]:
    """The backend of ``spec`` and the spec with its options checked against the backend's
    table and their defaults filled in."""
    backend = EMBEDDERS.get(spec.kind)
    if backend is None:
        known = ", ".join(sorted(EMBEDDERS))
        raise ConfigError(f"unknown embedder '{spec.kind}'; known: {known}", entry=entry)
    if spec.batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {spec.batch_size}", entry=entry)
    unknown = sorted(set(spec.backend_options) - set(backend.options))
    if unknown:
        owners = [name for name, other in EMBEDDERS.items() if unknown[0] in other.options]
        where = f" (an option of the {' or '.join(owners)} embedder)" if owners else ""
        raise ConfigError(
            f"embedder '{spec.kind}' takes no option {unknown[0]!r}{where}", entry=entry
        )
    # Checked as the settings are (schema.py); the values are final, so nothing is resolved.
    table = {name: dataclasses.replace(o, resolve=None) for name, o in backend.options.items()}
    given = spec.backend_options
    values = parse_options(table, given, Where(source=None, entry=entry or "", base=Path()))
    return backend, dataclasses.replace(spec, backend_options=values)


def load_embedder(spec: EmbedderSpec, *, cache_dir: Path, entry: str | None = None) -> Embedder:
    """Load the embedder `spec` describes, importing its backend only now.

    `cache_dir` holds models this plugin builds itself (distilled model2vec models, under
    ``cache_dir / "models"``). `entry` (e.g. ``"system.minilm"``) is named in `ConfigError`s.
    """
    backend, spec = _backend(spec, entry)
    return backend.load(spec, Path(cache_dir), entry)


class LazyEmbedder:
    """An embedder whose model is loaded on first use: its identity is known without it.

    A run whose vectors are all cached asks only for ``identity`` (and ``dim``, which the
    cache's own shards answer through :meth:`know_dim`), so it imports no model library and
    loads no model. The first ``encode_*`` call, or ``dim`` while unknown, loads it. The loaded
    model's identity must be the one worked out beforehand: anything else is a bug in the
    backend's ``identify`` (a ``RuntimeError``, never a silent cache mix-up).
    """

    def __init__(self, identity: str, load: Callable[[], Embedder]) -> None:
        self.identity = identity
        self._load = load
        self._model: Embedder | None = None
        self._dim: int | None = None
        #: Seconds the model's load took (0.0 until it is loaded), for the report's timings.
        self.load_seconds = 0.0

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"LazyEmbedder({self.identity}, {state})"

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._model is not None

    @property
    def model(self) -> Embedder:
        """The loaded embedder (loaded now if it was not)."""
        if self._model is None:
            began = time.perf_counter()
            model = self._load()
            self.load_seconds = time.perf_counter() - began
            if model.identity != self.identity:
                raise RuntimeError(
                    f"embedder identity changed on load: expected {self.identity}, "
                    f"loaded {model.identity}"
                )
            if self._dim is not None and model.dim != self._dim:
                raise RuntimeError(
                    f"embedder {self.identity} has dimension {model.dim}, its cache {self._dim}"
                )
            self._model = model
        return self._model

    @property
    def known_dim(self) -> int | None:
        """The dimension if known without loading the model, else None."""
        return self._model.dim if self._model is not None else self._dim

    def know_dim(self, dim: int) -> None:
        """Record the dimension found elsewhere (the cache's vectors of this identity)."""
        self._dim = int(dim)

    @property
    def dim(self) -> int:
        known = self.known_dim
        return known if known is not None else self.model.dim

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self.model.encode_documents(texts, progress=progress)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode_queries(texts)


def known_dim(embedder: Embedder) -> int | None:
    """``embedder.dim`` when it is known without loading a model, else None."""
    if isinstance(embedder, LazyEmbedder):
        return embedder.known_dim
    return embedder.dim


def model_loaded(embedder: Embedder) -> bool:
    """Whether ``embedder`` holds a loaded model (always, except an unused `LazyEmbedder`)."""
    return not isinstance(embedder, LazyEmbedder) or embedder.loaded


def open_embedder(spec: EmbedderSpec, *, cache_dir: Path, entry: str | None = None) -> Embedder:
    """The embedder `spec` describes, loaded only when first needed where its backend can tell
    its identity beforehand (a `LazyEmbedder`); otherwise loaded now, as `load_embedder`."""
    backend, spec = _backend(spec, entry)
    if backend.identify is not None:
        identity = backend.identify(spec, Path(cache_dir), entry)
        if identity is not None:
            return LazyEmbedder(identity, lambda: backend.load(spec, Path(cache_dir), entry))
    return backend.load(spec, Path(cache_dir), entry)
