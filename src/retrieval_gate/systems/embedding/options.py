"""An embedding system's option table, the checks across its options, and its identity.

The embedder's and the index's own keys come from their backends' tables (``embed/``,
``index/``), merged in by :func:`backend_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from retrieval_gate.schema import (
    Option,
    OptionTable,
    Where,
    at_least,
    beside_settings,
    one_of,
)
from retrieval_gate.systems.fields import FIELD_OPTIONS, check_fields, field_identity
from retrieval_gate.systems.retriever import TIMEOUT_OPTION

if TYPE_CHECKING:
    from retrieval_gate.systems.config import SystemConfig


#: Devices the ``device`` setting names; ``cuda:N`` picks one GPU.
DEVICES: tuple[str, ...] = ("cpu", "cuda", "mps", "auto")


def _valid_device(value: Any) -> bool:
    head, colon, number = value.partition(":")
    return value in DEVICES or (head == "cuda" and bool(colon) and number.isdigit())


OPTIONS: OptionTable = {
    "embedder": Option(str, None, "embedder backend by name (see the embedder table)"),
    "model": Option(
        str,
        None,
        "model: a local folder (relative to the settings file), an installed model package "
        "or a Hugging Face hub id",
        resolve=beside_settings,
    ),
    "index": Option(str, "chroma", "index backend by name (see the index table)"),
    "query_prompt": Option(str, "", "text put before each query"),
    "document_prompt": Option(str, "", "text put before each document"),
    "normalize": Option(bool, True, "L2-normalise the vectors"),
    "batch_size": Option(int, 64, "texts per encoder call", check=at_least(1), rule=">= 1"),
    "device": Option(
        str,
        "cpu",
        "torch device for sentence-transformers and for distillation (not in the identity: "
        "it does not change the vectors beyond float noise)",
        check=_valid_device,
        rule="cpu, cuda, cuda:N, mps, auto",
    ),
    "chunk_size": Option(
        int,
        None,
        "split documents into windows of this many units; a document ranks by its best chunk",
        check=at_least(1),
        rule=">= 1",
    ),
    "chunk_overlap": Option(
        int, 0, "units shared by neighbouring chunks", check=at_least(0), rule=">= 0"
    ),
    "chunk_unit": Option(
        str, "words", "what a chunk counts", check=one_of("words", "chars"), rule="words, chars"
    ),
    **FIELD_OPTIONS,  # fields, multi_vector, aggregation, weights: systems/fields.py
    "timeout": replace(
        TIMEOUT_OPTION,
        doc="seconds one query's embedding and search may take, a document encoding per batch "
        "of batch_size texts, a reranker's call and each call to a Ray cluster (docs/embedding.md, "
        '"Time limits and bad vectors"); 0 for no limit',
    ),
    "embed_executor": Option(
        str,
        "local",
        "where the documents the cache lacks are embedded: local (this process) or ray (fanned "
        "out over a Ray cluster, extra 'ray'; the same vectors, not in the identity)",
        check=one_of("local", "ray"),
        rule="local, ray",
    ),
    "ray_address": Option(
        str,
        None,
        'the Ray cluster for embed_executor = "ray" (ray://host:10001, host:6379 or auto); '
        "unset: a local cluster started for the session (not in the identity)",
        secret=True,
    ),
    "search_block_mb": Option(
        (int, float),
        256,
        "MiB of scores exact search (and the index recall figure) holds at once; rankings do "
        "not depend on it (not in the identity)",
        check=lambda v: v > 0,
        rule="> 0",
    ),
    "index_recall": Option(
        (str, int),
        "auto",
        "queries an approximate index's recall against exact search is measured on: all, off, "
        f"a number of them (evenly spaced), or auto (all up to {100_000:,} indexed units, "
        "else 200)",
        check=lambda v: v in ("auto", "all", "off") if isinstance(v, str) else v >= 1,
        rule="auto, all, off, >= 1",
    ),
    "index_stability": Option(
        str,
        "auto",
        "build an approximate index a second time from the same vectors and compare the two "
        "builds' top k on the index-recall queries (rank-biased overlap and overlap@k): on, "
        f"off, or auto (on up to {100_000:,} indexed units)",
        check=one_of("auto", "on", "off"),
        rule="auto, on, off",
    ),
}


def backend_options(spec: Mapping[str, Any], where: Where) -> OptionTable:
    """The option tables of the embedder and the index the system ``spec`` names, merged; an
    unknown name is a ``ConfigError`` listing the known ones; a shared key the embedder
    declares meaningless for it (``EmbedderBackend.not_applicable``) is one too."""
    from retrieval_gate.embed import EMBEDDERS
    from retrieval_gate.index import INDEXES

    embedder = spec.get("embedder")
    if not isinstance(embedder, str) or embedder not in EMBEDDERS:
        raise where.fail(f"unknown embedder {embedder!r}; known: {', '.join(sorted(EMBEDDERS))}")
    for key, why in EMBEDDERS[embedder].not_applicable.items():
        if key in spec:
            # Refused rather than ignored: the user meant it to change something.
            raise where.fail(f"'{key}' does not apply to the {embedder} embedder ({why}); drop it")
    index = spec.get("index", "chroma")
    if not isinstance(index, str) or index not in INDEXES:
        raise where.fail(f"unknown index {index!r}; known: {', '.join(sorted(INDEXES))}")
    return {**EMBEDDERS[embedder].options, **INDEXES[index].options}


def check_options(options: Mapping[str, Any], where: Where) -> None:
    """The checks across the resolved options that no single option can make."""
    from retrieval_gate.embed import EMBEDDERS

    embedder = EMBEDDERS.get(str(options.get("embedder")))
    maker = embedder.makes_model if embedder is not None else None  # model2vec's distill_from
    made = isinstance(options.get(maker), str) if maker is not None else False
    if not isinstance(options["model"], str) and not made:
        raise where.fail("an embedding system needs 'model'")
    if isinstance(options["model"], str) and made:
        raise where.fail(
            f"'model' and '{maker}' exclude each other: {maker} makes the model "
            "(the other would be ignored); keep one"
        )
    size, overlap = options["chunk_size"], options["chunk_overlap"]
    if size is None and overlap:
        raise where.fail(
            f"'chunk_overlap' ({overlap}) needs 'chunk_size': without it documents are not "
            "chunked and the overlap means nothing"
        )
    if size is not None and overlap >= size:
        # Said here, naming the system, rather than by the chunker when the run starts.
        raise where.fail(f"'chunk_overlap' ({overlap}) must be smaller than 'chunk_size' ({size})")
    check_fields(options, where)  # systems/fields.py
    if options.get("ray_address") is not None and options["embed_executor"] != "ray":
        raise where.fail(
            f"'ray_address' is set but 'embed_executor' is {options['embed_executor']!r}: "
            'documents are embedded in this process; set embed_executor = "ray" or drop '
            "'ray_address'"
        )
    if embedder is not None and embedder.check is not None:
        embedder.check(options, where)  # the backend's own checks across its keys
    from retrieval_gate.index import INDEXES

    backend = INDEXES.get(str(options.get("index")))
    stored = backend is not None and backend.stores_documents(options)
    if stored and (options["chunk_size"] is not None or options.get("fields")):
        raise where.fail(
            "a team's table ('table') holds whole documents: 'chunk_size' and 'fields' do not apply"
        )


def system_identity(options: Mapping[str, Any]) -> dict[str, Any]:
    """What the baseline's identity check compares of an embedding system."""
    # The 0.1 identity, key for key: baselines taken before backends had option tables compare.
    identity = {
        "embedder": options["embedder"],
        "model": options["model"],
        "index": options["index"],
        "query_prompt": options["query_prompt"],
        "document_prompt": options["document_prompt"],
        "normalize": options["normalize"],
        "chunk_size": options["chunk_size"],
        "chunk_overlap": options["chunk_overlap"],
        "distill_from": options.get("distill_from"),
    }
    from retrieval_gate.index import hnsw_settings, index_identity

    # HNSW keys only when set, so configurations written before they existed keep their identity.
    identity |= {f"hnsw_{name}": value for name, value in hnsw_settings(options).items()}
    identity |= index_identity(options)  # pgvector's and LanceDB's own (index/__init__.py)
    return identity | field_identity(options)  # empty without 'fields': systems/fields.py


def index_options(config: SystemConfig) -> dict[str, Any]:
    """The options of the system's index backend (e.g. chroma-server's host and port)."""
    from retrieval_gate.index import INDEXES

    table = INDEXES[config.option("index")].options
    return {key: config.options[key] for key in table}
