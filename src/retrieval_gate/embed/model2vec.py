"""model2vec backend: static embeddings, loaded from a model or distilled once and cached.

Imported only by `load_embedder`. Loading a static model needs numpy only; distillation needs
``model2vec[distill]`` (torch, transformers).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_gate import progress
from retrieval_gate.embed import (
    EmbedderBackend,
    EmbedderSpec,
    ResolvedModel,
    cached_hub_folder,
    encode_in_chunks,
    hub_candidates,
    hub_offline,
    import_optional,
    probe_hub,
    resolve_model_ref,
    spec_identity,
    torch_device,
)
from retrieval_gate.embed.sentence_transformers import source_identity
from retrieval_gate.errors import ConfigError, first_line
from retrieval_gate.schema import Option, at_least, beside_settings

KIND = "model2vec"

# Texts per encode call without a progress bar.
_CHUNK = 16384

#: Written last into a distilled model's folder; its presence marks the folder complete.
MARKER = "retrieval-gate-distill.json"


def _model2vec_version() -> str:
    try:
        return version("model2vec")
    except PackageNotFoundError:
        return "unknown"


class Model2VecEmbedder:
    """A loaded `StaticModel` with the spec's prompts and normalisation."""

    def __init__(self, model: Any, spec: EmbedderSpec, *, identity: str, path: Path) -> None:
        self._model = model
        self._spec = spec
        self.identity = identity
        self.dim = int(model.dim)
        #: Local folder the static model was loaded from (the distilled copy, when distilled).
        self.path = path

    def __repr__(self) -> str:
        return f"Model2VecEmbedder({self.identity})"

    def _encode(self, texts: list[str], prompt: str) -> np.ndarray:
        if prompt:
            texts = [prompt + text for text in texts]
        # The library failing underneath (tokenizer, weights) is its one line, said where every
        # encoder call passes (embed/checks.py), with the texts it was embedding.
        out = self._model.encode(
            texts,
            show_progress_bar=False,
            normalize=False,
            batch_size=self._spec.batch_size,
            # Worker processes under pytest (and xdist) cost more than they save at CI sizes.
            use_multiprocessing=False,
        )
        return np.asarray(out, dtype=np.float32)

    def _run(self, texts: Sequence[str], prompt: str, *, progress: bool, desc: str) -> np.ndarray:
        # Static vectors do not depend on their neighbours, so chunking changes no value; it
        # bounds the library's per-call lists (tokens, partial outputs) at any corpus size.
        chunk = self._spec.batch_size * 64 if progress else _CHUNK
        return encode_in_chunks(
            lambda batch: self._encode(batch, prompt),
            texts,
            dim=self.dim,
            normalize=self._spec.normalize,
            chunk_size=chunk,
            progress=progress,
            desc=desc,
        )

    def encode_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self._run(
            texts, self._spec.document_prompt, progress=progress, desc="embedding documents"
        )

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, self._spec.query_prompt, progress=False, desc="embedding queries")


def _load_static(static_model: Any, where: str, ref: str, entry: str | None) -> Any:
    try:
        # force_download=False: a hub id already in the local cache loads without the network.
        return static_model.from_pretrained(where, force_download=False)
    except Exception as exc:
        raise ConfigError(
            f"model '{ref}' could not be loaded: {first_line(exc)}; "
            "give a local path or an installed model package",
            entry=entry,
        ) from exc


def _load_plain(
    static_model: Any, spec: EmbedderSpec, entry: str | None
) -> tuple[Any, ResolvedModel, Path | None]:
    resolved = resolve_model_ref(spec.model, entry=entry)
    if resolved.path is not None:
        model = _load_static(static_model, str(resolved.path), resolved.ref, entry)
        return model, resolved, resolved.path
    folder = cached_hub_folder([resolved.ref])
    if folder is not None:
        return _load_static(static_model, str(folder), resolved.ref, entry), resolved, folder
    if hub_offline():
        raise ConfigError(
            f"model '{resolved.ref}' could not be loaded: not in the Hugging Face cache and "
            "HF_HUB_OFFLINE is set; give a local path or an installed model package",
            entry=entry,
        )
    probe_hub([resolved.ref], what=f"model '{resolved.ref}' could not be loaded", entry=entry)
    model = _load_static(static_model, resolved.ref, resolved.ref, entry)
    return model, resolved, cached_hub_folder([resolved.ref])


def distilled_key(source: dict[str, str], pca_dims: int | None) -> str:
    """Folder name of a distilled model: a hash of the source identity and distill settings.

    The model2vec version is part of it because a new release may distil differently.
    """
    payload = json.dumps(
        {"source": source, "pca_dims": pca_dims, "model2vec": _model2vec_version()},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


#: Beside the marker: the sealed record of every file of the distilled model (files/sealed.py),
#: written last. A flipped weight loads without complaint and its vectors would answer for the
#: model's.
RECORD = "retrieval-gate-files.seal.json"


def _complete(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def _sound(folder: Path) -> bool:
    """Whether the distilled model in ``folder`` is complete and the one its record vouches
    for. One that is not (a file torn, flipped or copied from another model) is said in one
    `CacheWarning` line naming the file and removed, to be distilled again; one without a record
    (saved before records were kept) is distilled again unsaid."""
    from retrieval_gate.files.sealed import check_files_record

    if not _complete(folder):
        return False
    found = check_files_record(
        folder / RECORD,
        f"distilled-model {folder.name}",
        what="distilled model2vec model",
        again="distilling it again",
    )
    if found is not None:
        return True
    # Renamed away first, so a reader never sees a folder half removed.
    aside = folder.with_name(f".tmp-{folder.name}-{uuid.uuid4().hex}")
    with contextlib.suppress(OSError):
        os.rename(folder, aside)
        shutil.rmtree(aside, ignore_errors=True)
    return False


def _distill(
    distill: Any, sources: Sequence[str], spec: EmbedderSpec, ref: str, entry: str | None
) -> Any:
    error: BaseException | None = None
    for source in sources:
        try:
            with _distill_progress(ref):
                return distill(
                    model_name=source,
                    pca_dims=spec.option("pca_dims"),
                    device=torch_device(spec.device),
                )
        except Exception as exc:
            error = exc
    reason = first_line(error) if error is not None else "nothing to distil from"
    raise ConfigError(
        f"could not distil a model2vec model from '{ref}': {reason}; "
        "give a local path or an installed model package",
        entry=entry,
    ) from error


class _ProgressBar:
    """Stands in for the ``tqdm`` bar model2vec's distillation draws while it encodes every
    token of the vocabulary (minutes on a CPU; pytest would swallow tqdm's own output): the
    same counts go to the gate's progress line instead."""

    def __init__(self, iterable: Any = None, *, ref: str = "", **kwargs: Any) -> None:
        self.iterable = iterable
        total = kwargs.get("total")
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        what = str(kwargs.get("desc") or "encoding").lower()
        self.task = progress.task(f"distilling a model2vec model from {ref}: {what}", total or 0)

    def __iter__(self) -> Any:
        for item in self.iterable or ():
            yield item
            self.task.update(1)
        self.task.close()

    def update(self, n: int = 1) -> None:
        self.task.update(n)

    def close(self) -> None:
        self.task.close()

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # set_description, set_postfix, refresh ...: nothing to show.
        return lambda *args, **kwargs: None


@contextlib.contextmanager
def _distill_progress(ref: str) -> Iterator[None]:
    """model2vec's encoding bar reported as the gate's progress while distilling (where its
    module has one; otherwise distillation runs as before, silently)."""
    try:
        inference = importlib.import_module("model2vec.distill.inference")
    except ImportError:
        yield
        return
    original = getattr(inference, "tqdm", None)
    if original is None:
        yield
        return
    setattr(inference, "tqdm", functools.partial(_ProgressBar, ref=ref))  # noqa: B010
    try:
        yield
    finally:
        setattr(inference, "tqdm", original)  # noqa: B010


def _save_atomically(model: Any, final: Path, info: dict[str, Any]) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    # Save into a private temporary folder and rename it into place, so a reader (or a second
    # process distilling the same model) sees either nothing or a complete model.
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        model.save_pretrained(str(tmp))
        (tmp / MARKER).write_text(json.dumps(info, sort_keys=True, indent=1) + "\n")
        from retrieval_gate.files.sealed import write_files_record

        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        write_files_record(tmp / RECORD, f"distilled-model {final.name}", files)
        if final.exists() and not _complete(final):
            # Left half-built by hand or by a tool that bypassed the rename: replace it.
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process won the race; its copy is as good as ours.
            if not _complete(final):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _distilled_folder(
    spec: EmbedderSpec, cache_dir: Path, entry: str | None
) -> tuple[Path, dict[str, Any]]:
    ref = spec.option("distill_from") or ""
    src = resolve_model_ref(ref, entry=entry)
    candidates = hub_candidates(src.ref)
    src_folder = src.path if src.path is not None else cached_hub_folder(candidates)
    models = cache_dir / "models"

    if src_folder is not None:
        source = source_identity(src, src_folder)
        final = models / distilled_key(source, spec.option("pca_dims"))
        if _sound(final):
            return final, source
        sources: Sequence[str] = [str(src_folder)]
    else:
        if hub_offline():
            raise ConfigError(
                f"cannot distil from '{src.ref}': not in the Hugging Face cache and "
                "HF_HUB_OFFLINE is set; give a local path or an installed model package",
                entry=entry,
            )
        sources = probe_hub(candidates, what=f"cannot distil from '{src.ref}'", entry=entry)

    distill_module = import_optional(
        "model2vec.distill", package="model2vec[distill]", extra="model2vec"
    )
    static = _distill(distill_module.distill, sources, spec, src.ref, entry)
    if src_folder is None:
        # Downloaded just now: key the copy by the files now in the cache, as later runs will.
        src_folder = cached_hub_folder(candidates)
    source = source_identity(src, src_folder)
    final = models / distilled_key(source, spec.option("pca_dims"))
    _save_atomically(static, final, _distilled_fields(source, spec))
    return final, source


def _distilled_fields(source: dict[str, str], spec: EmbedderSpec) -> dict[str, Any]:
    # Keyed by the source and settings, not the distilled bytes: PCA output may differ in the
    # last bits between machines, yet it is the same model for caching purposes.
    return {
        "distilled_from": source,
        "pca_dims": spec.option("pca_dims"),
        "model2vec": _model2vec_version(),
    }


def identify_model2vec(spec: EmbedderSpec, *, entry: str | None = None) -> str | None:
    """The identity `load_model2vec` gives `spec`, without importing model2vec or distilling:
    from the model's (or the distillation source's) local files. None when those are a hub id
    not downloaded yet."""
    if spec.option("distill_from") is not None:
        src = resolve_model_ref(spec.option("distill_from"), entry=entry)
        src_folder = (
            src.path if src.path is not None else cached_hub_folder(hub_candidates(src.ref))
        )
        if src_folder is None:
            return None
        return spec_identity(
            spec, kind=KIND, **_distilled_fields(source_identity(src, src_folder), spec)
        )
    resolved = resolve_model_ref(spec.model, entry=entry)
    found = resolved.path if resolved.path is not None else cached_hub_folder([resolved.ref])
    if found is None:
        return None
    return spec_identity(spec, kind=KIND, **source_identity(resolved, found))


def load_model2vec(
    spec: EmbedderSpec, cache_dir: Path, entry: str | None = None
) -> Model2VecEmbedder:
    m2v = import_optional("model2vec", package="model2vec", extra="model2vec")
    static_model = m2v.StaticModel
    fields: dict[str, Any]
    if spec.option("distill_from") is not None:
        folder, source = _distilled_folder(spec, cache_dir, entry)
        model = _load_static(static_model, str(folder), str(folder), entry)
        fields = _distilled_fields(source, spec)
    else:
        model, resolved, found = _load_plain(static_model, spec, entry)
        folder = found if found is not None else Path(resolved.ref)
        fields = source_identity(resolved, found)
    return Model2VecEmbedder(
        model, spec, identity=spec_identity(spec, kind=KIND, **fields), path=folder
    )


def _identify(spec: EmbedderSpec, cache_dir: Path, entry: str | None) -> str | None:
    return identify_model2vec(spec, entry=entry)


ORDER = 20
BACKEND = EmbedderBackend(
    name="model2vec",
    extra="model2vec",
    options={
        "distill_from": Option(
            str,
            None,
            "a sentence-transformers model to distil a static model from (once, cached); "
            "replaces `model`",
            resolve=beside_settings,
        ),
        "pca_dims": Option(
            int, 256, "dimensions a distilled model keeps", check=at_least(1), rule=">= 1"
        ),
    },
    load=load_model2vec,
    summary="static embeddings: a model2vec model, or one distilled from a transformer",
    identify=_identify,
    makes_model="distill_from",
)
