"""Corpus loading, chunking, chunk-hit mapping and the BEIR / TREC collection readers."""

from __future__ import annotations

import copy
import gzip
import json
import pickle
from pathlib import Path

import pytest

from retrieval_gate.corpus import (
    Chunk,
    ChunkingError,
    Corpus,
    Document,
    chunk_documents,
    load_corpus,
    map_chunk_hits,
    read_beir_qrels,
    read_beir_queries,
    read_trec_qrels,
    read_trec_topics,
)
from retrieval_gate.errors import CorpusError

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
VASWANI = SHARED_DATA / "vaswani"
TREC_EVAL = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, *rows: object) -> Path:
    return write(path, "".join(json.dumps(row) + "\n" for row in rows))


def error_of(excinfo: pytest.ExceptionInfo[CorpusError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message, message
    return message


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared test data not present: {path} (only in the development checkout)")
    return path


# --------------------------------------------------------------------------- Document / Corpus


def test_content_joins_title_and_text() -> None:
    assert Document(id="a", text="body", title="Head").content == "Head\nbody"
    assert Document(id="a", text="body").content == "body"


def test_document_is_hashable_read_only_and_picklable() -> None:
    source = {"lang": "en", "tags": ["x"]}
    doc = Document(id="a", text="t", metadata=source)
    source["lang"] = "de"
    assert doc.metadata["lang"] == "en"
    with pytest.raises(TypeError):
        doc.metadata["lang"] = "fr"  # type: ignore[index]
    assert hash(doc) == hash(Document(id="a", text="t", metadata={"other": 1}))
    assert pickle.loads(pickle.dumps(doc)) == doc
    assert copy.deepcopy(doc).metadata == {"lang": "en", "tags": ["x"]}


def test_corpus_lookup_and_ids(tmp_path: Path) -> None:
    docs = (Document(id="b", text="2"), Document(id="a", text="1"))
    corpus = Corpus(source=tmp_path, documents=docs)
    assert len(corpus) == 2
    assert corpus.ids == ("b", "a")
    assert "a" in corpus and "c" not in corpus and 1 not in corpus
    assert corpus.get("a") == Document(id="a", text="1")
    assert corpus.get("c") is None
    assert [d.id for d in corpus] == ["b", "a"]
    assert pickle.loads(pickle.dumps(corpus)) == corpus


def test_corpus_rejects_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as excinfo:
        Corpus(source=tmp_path, documents=(Document(id="a", text="1"), Document(id="a", text="2")))
    assert error_of(excinfo) == f"{tmp_path} [id a]: duplicate document id 'a'"


def test_digest_tracks_ids_and_content_only(tmp_path: Path) -> None:
    def digest(*docs: Document) -> str:
        return Corpus(source=tmp_path, documents=docs).digest

    a, b = Document(id="a", text="alpha"), Document(id="b", text="beta")
    base = digest(a, b)
    assert len(base) == 64 and int(base, 16) >= 0
    assert digest(b, a) == base  # source order does not matter
    assert digest(a, Document(id="b", text="beta", metadata={"x": 1})) == base
    assert digest(a, Document(id="b", text="beta!")) != base
    assert digest(a, Document(id="b", text="beta", title="T")) != base
    assert digest(a, Document(id="c", text="beta")) != base
    assert digest(a) != base
    # Length prefixes: moving a character between id and content is a different corpus.
    assert digest(Document(id="ab", text="c")) != digest(Document(id="a", text="bc"))


# --------------------------------------------------------------------------- folder


def test_folder_recursive_sorted_hidden_skipped(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    write(root / "sql" / "b.sql", "SELECT 2;\r\n")
    write(root / "a.md", "\ufeffalpha\n")
    write(root / "sql" / "base" / "orders.sql", "SELECT * FROM orders;")
    write(root / ".git" / "config", "hidden folder")
    write(root / "sql" / ".secret", "hidden file")
    corpus = load_corpus(root)
    assert corpus.source == root
    assert corpus.ids == ("a.md", "sql/b.sql", "sql/base/orders.sql")
    assert corpus.get("a.md") == Document(id="a.md", text="alpha\n")
    assert corpus.get("sql/b.sql") == Document(id="sql/b.sql", text="SELECT 2;\n")
    assert load_corpus(str(root), format="folder") == corpus


def test_special_files_are_skipped_with_a_note_never_opened(tmp_path: Path) -> None:
    import os
    import socket

    root = tmp_path / "corpus"
    write(root / "a.md", "alpha")
    # Opening a FIFO with no writer blocks forever: the loader must not open it.
    os.mkfifo(root / "pipe")
    (root / "sub").mkdir()
    os.mkfifo(root / "sub" / "queue")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock"))
        corpus = load_corpus(root)
    finally:
        server.close()
    assert corpus.ids == ("a.md",)
    assert corpus.notes == (
        "skipped 3 special files (pipes, sockets, devices): pipe (named pipe), sock (socket), "
        "sub/queue (named pipe)",
    )
    # Notes are not content: the digest is that of the same documents without them.
    write(tmp_path / "plain" / "a.md", "alpha")
    assert corpus.digest == load_corpus(tmp_path / "plain").digest
    with pytest.raises(CorpusError) as info:
        load_corpus(root / "pipe")
    assert str(info.value) == f"{root / 'pipe'}: is a named pipe, not a file or folder"


def test_the_gates_own_outputs_are_never_read(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    write(root / "a.md", "alpha")
    write(root / "retrieval-gate-report.md", "| metric | value |")
    write(root / "out" / "report.json", "{}")
    write(root / "cache" / "embeddings" / "x.npy", "not text")
    corpus = load_corpus(
        root,
        exclude=[root / "retrieval-gate-report.md", root / "out" / "report.json", root / "cache"],
    )
    assert corpus.ids == ("a.md",)
    assert corpus.notes == (
        "left out 3 of the gate's own outputs: cache/, out/report.json, retrieval-gate-report.md",
    )
    # Without outputs inside it, nothing is said.
    assert load_corpus(root, exclude=[tmp_path / "elsewhere.md"]).notes == ()


def test_folder_with_non_utf8_file_names_the_file(tmp_path: Path) -> None:
    write(tmp_path / "ok.txt", "fine")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"line one\ncaf\xe9\n")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(tmp_path)
    assert error_of(excinfo) == (
        f"{bad} [line 2]: not UTF-8 text (byte 0xe9 at offset 12); convert it to UTF-8, or move "
        "it away if it is binary"
    )


def test_folder_with_only_hidden_files_is_empty(tmp_path: Path) -> None:
    write(tmp_path / ".hidden", "x")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(tmp_path)
    assert error_of(excinfo) == (
        f"{tmp_path}: folder has no files (hidden files and folders are skipped)"
    )


# --------------------------------------------------------------------------- JSONL / BEIR


def test_jsonl_ids_titles_metadata(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    write(
        path,
        '{"id": "d1", "text": "one", "source": "wiki", "year": 2020}\n'
        "\n"
        '{"_id": 7, "title": "Seven", "text": "seven"}\n'
        '{"id": "d3", "text": "", "title": null}\n',
    )
    corpus = load_corpus(path)
    assert corpus.ids == ("d1", "7", "d3")
    assert corpus.documents[0] == Document(
        id="d1", text="one", metadata={"source": "wiki", "year": 2020}
    )
    assert corpus.documents[1].title == "Seven"
    assert corpus.documents[1].content == "Seven\nseven"
    assert corpus.documents[1].metadata == {}
    assert corpus.documents[2] == Document(id="d3", text="", title="")


def test_json_array_file(tmp_path: Path) -> None:
    rows = [{"id": "a", "text": "x"}, {"id": 2, "text": "y"}]
    path = write(tmp_path / "docs.json", json.dumps(rows))
    assert load_corpus(path).ids == ("a", "2")
    bad = write(tmp_path / "bad.json", json.dumps([{"id": "a", "text": "x"}, "b"]))
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(bad)
    assert error_of(excinfo) == f"{bad} [item 2]: expected a JSON object, got str"


def test_jsonl_detected_by_content_and_gzip(tmp_path: Path) -> None:
    plain = write(tmp_path / "docs.data", '{"id": "a", "text": "x"}\n')
    assert load_corpus(plain).ids == ("a",)
    packed = tmp_path / "docs.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"id": "z", "text": "zz"}\n'))
    assert load_corpus(packed).documents == (Document(id="z", text="zz"),)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            '{"id": "a", "text": "x"}\n{"id": "b", "text": \n',
            "line 2]: invalid JSON at column 21: Expecting value",
        ),
        ('{"id": "a", "text": "x"}\n\n{"text": "x"}\n', "line 3]: document has no 'id' (or '_id')"),
        ('{"id": "a"}\n', "line 1]: document 'a' has no 'text'"),
        ('{"id": "a", "text": 5}\n', "line 1]: 'text' of document 'a' must be a string, got int"),
        (
            '{"id": "a", "text": "x", "title": 1}\n',
            "line 1]: 'title' of document 'a' must be a string",
        ),
        ('{"id": true, "text": "x"}\n', "line 1]: 'id' must be a string or an integer, got true"),
        ('{"id": 1.5, "text": "x"}\n', "line 1]: 'id' must be a string or an integer, got 1.5"),
        ('{"id": " ", "text": "x"}\n', "line 1]: 'id' is empty"),
        ('["a", "x"]\n', "line 1]: expected a JSON object, got list"),
        (
            '{"id": 1, "text": "x"}\n{"id": "1", "text": "y"}\n',
            "line 2]: duplicate document id '1' (first on line 1)",
        ),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, lines: str, expected: str) -> None:
    path = write(tmp_path / "docs.jsonl", lines)
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path)
    message = error_of(excinfo)
    assert message.startswith(f"{path} [")
    assert expected in message


def test_beir_folder(tmp_path: Path) -> None:
    jsonl(
        tmp_path / "corpus.jsonl",
        {"_id": "d1", "title": "T1", "text": "one", "url": "u"},
        {"_id": "d2", "title": "", "text": "two"},
    )
    corpus = load_corpus(tmp_path)
    assert corpus.source == tmp_path / "corpus.jsonl"
    assert corpus.ids == ("d1", "d2")
    assert corpus.documents[0].content == "T1\none"
    assert corpus.documents[0].metadata == {"url": "u"}
    assert corpus.documents[1].content == "two"
    assert load_corpus(tmp_path, format="beir") == corpus
    assert load_corpus(tmp_path / "corpus.jsonl", format="beir") == corpus


def test_beir_folder_without_corpus_file(tmp_path: Path) -> None:
    write(tmp_path / "queries.jsonl", "")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(tmp_path, format="beir")
    assert error_of(excinfo) == f"{tmp_path}: BEIR folder has no corpus.jsonl"


def test_empty_jsonl_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "docs.jsonl", "\n\n")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path)
    assert error_of(excinfo) == f"{path}: corpus is empty: no documents found"


# --------------------------------------------------------------------------- TREC

TREC_SAMPLE = """\
<DOC>
<DOCNO> FT-1 </DOCNO>
<HEADLINE>ignored tag</HEADLINE>
<TITLE>Storm &amp; rain</TITLE>
<TEXT>
Heavy rain fell.
<P>Rivers rose.</P>
</TEXT>
</DOC>

<DOC>
<DOCNO>FT-2</DOCNO>
<DOCHDR>http://example.org HTTP/1.1 200</DOCHDR>
plain   body
</DOC>
"""


def test_trec_file_text_title_and_tags(tmp_path: Path) -> None:
    path = write(tmp_path / "docs.trec", "\n" + TREC_SAMPLE)
    corpus = load_corpus(path)
    assert corpus.ids == ("FT-1", "FT-2")
    assert corpus.documents[0] == Document(
        id="FT-1", title="Storm & rain", text="ignored tag\nHeavy rain fell.\nRivers rose."
    )
    assert corpus.documents[1] == Document(id="FT-2", text="plain   body")


def test_trec_head_used_as_title(tmp_path: Path) -> None:
    path = write(tmp_path / "x", "<doc>\n<docno>9</docno>\n<head>Big news</head>\nbody\n</doc>\n")
    assert load_corpus(path).documents == (Document(id="9", text="body", title="Big news"),)


def test_trec_folder_needs_explicit_format(tmp_path: Path) -> None:
    write(tmp_path / "a.trec", "<DOC><DOCNO>1</DOCNO>one</DOC>")
    write(tmp_path / "sub" / "b.trec", "<DOC><DOCNO>2</DOCNO>two</DOC>")
    write(tmp_path / "README", "no documents here")
    corpus = load_corpus(tmp_path, format="trec")
    assert corpus.ids == ("1", "2")
    assert corpus.documents[1].text == "two"
    assert load_corpus(tmp_path).ids == ("README", "a.trec", "sub/b.trec")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "<DOC>\n<DOCNO>1</DOCNO>x\n</DOC>\n<DOC>\n<TEXT>y</TEXT>\n</DOC>\n",
            "[line 4]: <DOC> has no <DOCNO>",
        ),
        (
            "<DOC>\n<DOCNO>1</DOCNO>x\n</DOC>\n\n<DOC>\n<DOCNO>1</DOCNO>y\n</DOC>\n",
            "[line 5]: duplicate DOCNO '1'",
        ),
        (
            "<DOC>\n<DOCNO>1</DOCNO>x\n</DOC>\n<DOC>\n<DOCNO>2</DOCNO>y\n",
            "[line 4]: <DOC> without a matching </DOC>",
        ),
    ],
)
def test_trec_errors_name_file_and_line(tmp_path: Path, content: str, expected: str) -> None:
    path = write(tmp_path / "docs.trec", content)
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path)
    assert error_of(excinfo).startswith(f"{path} {expected}")


def test_trec_file_without_docs(tmp_path: Path) -> None:
    path = write(tmp_path / "docs.trec", "nothing\n")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path, format="trec")
    assert error_of(excinfo) == f"{path}: no <DOC> ... </DOC> elements found"


# --------------------------------------------------------------------------- detection errors


def test_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(tmp_path / "nope")
    assert error_of(excinfo) == f"{tmp_path / 'nope'}: corpus not found"


def test_undetectable_and_unknown_format(tmp_path: Path) -> None:
    path = write(tmp_path / "notes.txt", "just text")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path)
    assert error_of(excinfo).startswith(f"{path}: cannot tell the corpus format")
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path, format="csv")
    assert error_of(excinfo) == (
        f"{path}: unknown corpus format 'csv'; expected one of folder, jsonl, beir, trec"
    )
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(path, format="folder")
    assert error_of(excinfo) == f"{path}: format 'folder' needs a directory"
    with pytest.raises(CorpusError) as excinfo:
        load_corpus(tmp_path, format="jsonl")
    assert error_of(excinfo) == f"{tmp_path}: is not a file"


# --------------------------------------------------------------------------- chunking


def test_word_windows_with_overlap() -> None:
    doc = Document(id="d", text="w0 w1 w2 w3 w4 w5 w6 w7 w8 w9")
    # size 4, step 4 - 1 = 3: starts 0, 3, 6; the window at 6 reaches w9, so it is the last.
    assert chunk_documents([doc], size=4, overlap=1) == [
        Chunk(id="d#0", parent="d", text="w0 w1 w2 w3"),
        Chunk(id="d#1", parent="d", text="w3 w4 w5 w6"),
        Chunk(id="d#2", parent="d", text="w6 w7 w8 w9"),
    ]
    # 11 words: starts 0, 3, 6, 9; the last window holds what is left.
    eleven = Document(id="e", text="w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10")
    assert [c.text for c in chunk_documents([eleven], size=4, overlap=1)] == [
        "w0 w1 w2 w3",
        "w3 w4 w5 w6",
        "w6 w7 w8 w9",
        "w9 w10",
    ]


def test_word_windows_without_overlap_keep_spacing_and_title() -> None:
    doc = Document(id="d", title="Title here", text="a  b\nc d e")
    # content "Title here\na  b\nc d e" has 7 words: [Title here a] [b c d] [e].
    assert [c.text for c in chunk_documents([doc], size=3)] == ["Title here\na", "b\nc d", "e"]


def test_char_windows() -> None:
    doc = Document(id="x", text="abcdefghij")
    # size 4, overlap 2, step 2: starts 0, 2, 4, 6 ("ghij" reaches the end).
    assert [c.text for c in chunk_documents([doc], size=4, overlap=2, unit="chars")] == [
        "abcd",
        "cdef",
        "efgh",
        "ghij",
    ]
    assert [c.text for c in chunk_documents([doc], size=3, unit="chars")] == [
        "abc",
        "def",
        "ghi",
        "j",
    ]


def test_short_and_empty_documents_are_one_chunk() -> None:
    docs = [Document(id="s", text="one two"), Document(id="e", text="")]
    assert chunk_documents(docs, size=5, overlap=4) == [
        Chunk(id="s#0", parent="s", text="one two"),
        Chunk(id="e#0", parent="e", text=""),
    ]
    exact = Document(id="x", text="a b c")
    assert chunk_documents([exact], size=3) == [Chunk(id="x#0", parent="x", text="a b c")]


@pytest.mark.parametrize(
    ("size", "overlap", "unit", "expected"),
    [
        (0, 0, "words", "chunk size must be a whole number >= 1, got 0"),
        (4, 4, "words", "chunk overlap must be a whole number with 0 <= overlap < size (4), got 4"),
        (
            2,
            -1,
            "words",
            "chunk overlap must be a whole number with 0 <= overlap < size (2), got -1",
        ),
        (4, 0, "tokens", "chunk unit must be one of words, chars, got 'tokens'"),
    ],
)
def test_bad_chunk_settings(size: int, overlap: int, unit: str, expected: str) -> None:
    with pytest.raises(ChunkingError) as excinfo:
        chunk_documents([Document(id="d", text="x")], size=size, overlap=overlap, unit=unit)
    assert str(excinfo.value) == f"[chunking]: {expected}"
    assert isinstance(excinfo.value, ValueError)
    assert isinstance(excinfo.value, CorpusError)


def test_map_chunk_hits_first_hit_wins() -> None:
    parent_of = {"a#0": "a", "a#1": "a", "b#0": "b", "c#0": "c"}
    hits = [("a#1", 0.9), ("b#0", 0.8), ("a#0", 0.7), ("c#0", 0.6), ("b#0", 0.5)]
    assert map_chunk_hits(hits, parent_of) == [("a", 0.9), ("b", 0.8), ("c", 0.6)]
    assert map_chunk_hits([("plain", 1.0), ("a#0", 0.5)], parent_of) == [("plain", 1.0), ("a", 0.5)]
    assert map_chunk_hits([], parent_of) == []


def test_chunks_map_back_to_parents() -> None:
    docs = [Document(id="p", text="a b c d e"), Document(id="q", text="f")]
    chunks = chunk_documents(docs, size=2)
    parent_of = {c.id: c.parent for c in chunks}
    assert parent_of == {"p#0": "p", "p#1": "p", "p#2": "p", "q#0": "q"}
    assert map_chunk_hits([("p#2", 3.0), ("q#0", 2.0), ("p#0", 1.0)], parent_of) == [
        ("p", 3.0),
        ("q", 2.0),
    ]


# --------------------------------------------------------------------------- BEIR readers


def test_beir_queries(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "queries.jsonl",
        {"_id": "q1", "text": "what is x", "metadata": {}},
        {"_id": 2, "text": "why"},
    )
    assert read_beir_queries(path) == {"q1": "what is x", "2": "why"}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([{"_id": "q1"}], "[line 1]: query 'q1' needs a non-empty string 'text'"),
        ([{"text": "x"}], "[line 1]: query has no 'id' (or '_id')"),
        (
            [{"_id": "q", "text": "a"}, {"_id": "q", "text": "b"}],
            "[line 2]: duplicate query id 'q' (first on line 1)",
        ),
    ],
)
def test_beir_query_errors(tmp_path: Path, rows: list[object], expected: str) -> None:
    path = jsonl(tmp_path / "queries.jsonl", *rows)
    with pytest.raises(CorpusError) as excinfo:
        read_beir_queries(path)
    assert error_of(excinfo).startswith(f"{path} {expected}")


def test_beir_qrels_with_and_without_header(tmp_path: Path) -> None:
    expected = {"q1": {"d1": 1, "d2": 2}, "q2": {"d1": 0}}
    body = "q1\td1\t1\nq1\td2\t2\n\nq2\td1\t0\n"
    with_header = write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n" + body)
    without = write(tmp_path / "qrels" / "dev.tsv", body)
    assert read_beir_qrels(with_header) == expected
    assert read_beir_qrels(without) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "query-id\tcorpus-id\tscore\nq1\td1\n",
            "[line 2]: expected 3 tab-separated fields (query-id, corpus-id, score), got 2",
        ),
        ("q1\td1\t1\nq1\td2\thigh\n", "[line 2]: relevance grade must be an integer, got 'high'"),
        (
            "q1\td1\t1\nq1\td1\t2\n",
            "[line 2]: query 'q1' judges document 'd1' twice (first on line 1)",
        ),
    ],
)
def test_beir_qrels_errors(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path / "test.tsv", body)
    with pytest.raises(CorpusError) as excinfo:
        read_beir_qrels(path)
    assert error_of(excinfo) == f"{path} {expected}"


# --------------------------------------------------------------------------- TREC readers

CLASSIC_TOPICS = """\
<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international
criminal activity.

<narr> Narrative:
A relevant document must name the organization.
</top>

<top>
<num> Number: 302 </num>
<title> Topic:  Poliomyelitis and Post-Polio </title>
<desc> Description:
Is the disease under control?
</top>
"""


def test_classic_trec_topics(tmp_path: Path) -> None:
    path = write(tmp_path / "topics.301-302", CLASSIC_TOPICS)
    assert read_trec_topics(path) == {
        "301": "International Organized Crime",
        "302": "Poliomyelitis and Post-Polio",
    }
    assert read_trec_topics(path, field="desc") == {
        "301": "Identify organizations that participate in international criminal activity.",
        "302": "Is the disease under control?",
    }


def test_trec_topic_errors(tmp_path: Path) -> None:
    path = write(tmp_path / "topics", CLASSIC_TOPICS)
    with pytest.raises(CorpusError) as excinfo:
        read_trec_topics(path, field="narr")
    assert error_of(excinfo) == f"{path} [line 13]: topic 302 has no <narr> text"
    with pytest.raises(CorpusError) as excinfo:
        read_trec_topics(path, field="summary")
    assert error_of(excinfo) == (
        f"{path}: unknown topic field 'summary'; expected one of title, desc, narr"
    )
    dup = write(
        tmp_path / "dup",
        "<top><num>1</num><title>a</title></top>\n<top><num>1</num><title>b</title></top>\n",
    )
    with pytest.raises(CorpusError) as excinfo:
        read_trec_topics(dup)
    assert error_of(excinfo) == f"{dup} [line 2]: duplicate topic 1 (first on line 1)"
    nonum = write(tmp_path / "nonum", "<top><title>a</title></top>\n")
    with pytest.raises(CorpusError) as excinfo:
        read_trec_topics(nonum)
    assert error_of(excinfo) == f"{nonum} [line 1]: topic has no <num>"
    with pytest.raises(CorpusError) as excinfo:
        read_trec_topics(tmp_path / "absent")
    assert error_of(excinfo) == f"{tmp_path / 'absent'}: not found"


def test_trec_qrels_comments_and_grades(tmp_path: Path) -> None:
    path = write(
        tmp_path / "qrels",
        "# judged by hand\n301 0 doc-1 1\n\n301 0 doc#2 0\n302 Q0 doc-1 -1\n  303 0 d 3  \n",
    )
    assert read_trec_qrels(path) == {
        "301": {"doc-1": 1, "doc#2": 0},
        "302": {"doc-1": -1},
        "303": {"d": 3},
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("1 0 a 1\n1 0 b\n", "[line 2]: expected 4 fields (qid iter docno rel), got 3: '1 0 b'"),
        ("1 0 a 1\n1 0 b 0.5\n", "[line 2]: relevance grade must be an integer, got '0.5'"),
        ("1 0 a 1\n\n1 0 a 1\n", "[line 3]: query '1' judges document 'a' twice (first on line 1)"),
        ("# only a comment\n", ": no judgments found"),
    ],
)
def test_trec_qrels_errors(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path / "qrels", body)
    with pytest.raises(CorpusError) as excinfo:
        read_trec_qrels(path)
    assert error_of(excinfo) == f"{path}{'' if expected.startswith(':') else ' '}{expected}"


# --------------------------------------------------------------------------- real collections


def test_vaswani_corpus() -> None:
    corpus = load_corpus(need(VASWANI / "corpus" / "doc-text.trec"))
    assert len(corpus) == 11429
    assert corpus.ids[:3] == ("1", "2", "3")
    assert corpus.ids[-1] == "11429"
    assert corpus.get("4") == Document(
        id="4", text="the british computer society  report of a conference held in cambridge\njune"
    )
    assert all(doc.title == "" for doc in corpus)
    assert load_corpus(VASWANI / "corpus", format="trec").digest == corpus.digest


def test_vaswani_topics_and_qrels() -> None:
    topics = read_trec_topics(need(VASWANI / "query-text.trec"))
    assert len(topics) == 93
    assert topics["1"] == (
        "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"
    )
    assert topics["93"].startswith("HIGH FREQUENCY OSCILLATORS USING TRANSISTORS")
    qrels = read_trec_qrels(VASWANI / "qrels")
    assert sum(len(judged) for judged in qrels.values()) == 2083
    assert qrels["1"]["1239"] == 1
    assert set(qrels) <= set(topics)


def test_trec_eval_qrels() -> None:
    qrels = read_trec_qrels(need(TREC_EVAL / "qrels.test"))
    assert {qid: len(judged) for qid, judged in qrels.items()} == {
        "301": 1708,
        "302": 1061,
        "303": 912,
    }
    assert qrels["301"]["CR93E-1282"] == 1
    commented = read_trec_qrels(TREC_EVAL / "qrels.test.with-comments")
    # '#' starts a comment only at the start of a line; inside a docno it is part of the id.
    assert commented["301"]["CR#93E-1860"] == 0
    levels = read_trec_qrels(TREC_EVAL / "qrels.rel_level")
    assert sorted({g for judged in levels.values() for g in judged.values()}) == [-1, 0, 1, 2, 3, 4]
