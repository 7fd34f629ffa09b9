"""Corpora: the documents a suite is run against.

A corpus is a tuple of :class:`Document` s read from one of four sources (a folder of text files,
a JSONL file, a BEIR folder, a TREC ``<DOC>`` file or folder: :mod:`.loaders`). Chunking splits
documents into windows for embedding and maps chunk hits back to documents (:mod:`.chunking`);
:mod:`.collections` reads the queries and judgments of BEIR and TREC collections. Every problem
in the user's files is a :class:`~retrieval_gate.errors.CorpusError` naming the file and entry.
Standard library only: imported while collecting suites.
"""

from __future__ import annotations

from retrieval_gate.corpus.chunking import CHUNK_UNITS, chunk_documents, map_chunk_hits
from retrieval_gate.corpus.collections import (
    TOPIC_FIELDS,
    read_beir_qrels,
    read_beir_queries,
    read_trec_qrels,
    read_trec_topics,
)
from retrieval_gate.corpus.loaders import FORMATS, load_corpus, names_jsonl
from retrieval_gate.corpus.model import Chunk, ChunkingError, Corpus, Document

__all__ = [
    "CHUNK_UNITS",
    "FORMATS",
    "TOPIC_FIELDS",
    "Chunk",
    "ChunkingError",
    "Corpus",
    "Document",
    "chunk_documents",
    "load_corpus",
    "map_chunk_hits",
    "names_jsonl",
    "read_beir_qrels",
    "read_beir_queries",
    "read_trec_qrels",
    "read_trec_topics",
]
