"""Pair suites (SPEC 12): text pairs with a gold similarity, judged by correlation.

``pairs:`` in a ``kind: pairs`` suite is a TSV file (``text_a <TAB> text_b <TAB> score``, an
optional header line), a JSON list or JSONL file of ``{a, b, score}`` objects, or an inline list
of ``[a, b, score]`` triples or such objects. Each pair becomes a :class:`TextPair` whose ``text``
is the first text, ``text_b`` the second and ``gold`` the gold score.

Running one (:func:`run_pairs`) embeds both texts of every pair with the system's embedder,
through the embedding cache, and takes their cosine similarity. Only embedding systems have an
embedder: any other system kind is a one-line error.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RunError, SuiteError
from retrieval_gate.schema import Option, OptionTable
from retrieval_gate.suites.kind import Resources, SuiteKind, UnitRecord
from retrieval_gate.suites.units import Unit, optional_label

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.records import QueryRecord, RunRecord, Section
    from retrieval_gate.suites.result import RunResult
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems import OpenContext
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["KIND", "PairExtras", "PairsKind", "TextPair", "parse_pairs", "run_pairs"]

#: How many of the pairs furthest from the gold order the report lists per system.
WORST = 5


@dataclass(frozen=True)
class TextPair(Unit):
    """A pair suite's unit: ``text`` and ``text_b``, and their gold similarity score."""

    text_b: str = ""
    gold: float = 0.0

    def digest_extra(self) -> tuple[Any, ...]:
        return ([self.text_b, self.gold],)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(t for t in (self.text, self.text_b) if t)


@dataclass(frozen=True)
class PairExtras:
    """A pair's record extras: its second text (the first is the record's ``text``)."""

    text_b: str

    def to_json(self) -> dict[str, Any]:
        return {"text_b": self.text_b}


_A_KEYS = ("a", "text_a", "sentence1")
_B_KEYS = ("b", "text_b", "sentence2")
_SCORE_KEYS = ("score", "gold", "label")
_OBJECT_KEYS = frozenset({*_A_KEYS, *_B_KEYS, *_SCORE_KEYS, "id", "category", "difficulty"})


def parse_pairs(raw: Any, path: Path) -> list[TextPair]:
    """The pairs of a suite: ``raw`` is the suite's ``pairs`` value, ``path`` the suite file.

    A file path is relative to the suite file; ``.tsv``/``.txt`` is read as TSV, ``.json`` as a
    JSON list, ``.jsonl`` as one object per line. Every bad entry is a
    :class:`~retrieval_gate.errors.SuiteError` naming the file and the entry (the TSV line).
    """
    if isinstance(raw, str):
        from retrieval_gate.files.read import read_text

        source = (path.parent / raw).resolve()
        if not source.exists():
            raise SuiteError(f"pairs file not found: {source}", path=path, entry="pairs")
        text = read_text(source, what="pairs file", error=SuiteError)
        suffix = source.suffix.lower()
        if suffix in (".tsv", ".txt"):
            entries = list(_tsv_entries(text, source))
        elif suffix == ".jsonl":
            entries = list(_jsonl_entries(text, source))
        elif suffix == ".json":
            entries = _json_entries(text, source)
        else:
            raise SuiteError(
                f"pairs file must be .tsv, .json or .jsonl, got {source.name!r}",
                path=path,
                entry="pairs",
            )
        where = source
    elif isinstance(raw, list):
        entries = [(f"pairs[{i}]", item) for i, item in enumerate(raw)]
        where = path
    else:
        raise SuiteError(
            "'pairs' must be a file (.tsv, .json, .jsonl) or a list of [a, b, score]",
            path=path,
            entry="pairs",
        )
    return _queries(entries, where)


def _tsv_entries(text: str, source: Path) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise SuiteError(
                f"expected 3 tab-separated fields (text_a, text_b, score), got {len(fields)}",
                path=source,
                entry=f"line {number}",
            )
        if number == _first_line(text) and not _parses(fields[2]):
            continue  # a header line such as "sentence1<TAB>sentence2<TAB>score"
        out.append((f"line {number}", fields))
    return out


def _first_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if line.strip())


def _jsonl_entries(text: str, source: Path) -> list[tuple[str, Any]]:
    from retrieval_gate.files.read import parse_structured

    out: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        entry = f"line {number}"
        item = parse_structured(line, format="json", path=source, error=SuiteError, entry=entry)
        out.append((entry, item))
    return out


def _json_entries(text: str, source: Path) -> list[tuple[str, Any]]:
    from retrieval_gate.files.read import parse_structured

    data = parse_structured(text, format="json", path=source, error=SuiteError)
    if not isinstance(data, list):
        raise SuiteError("a JSON pairs file is a list of {a, b, score} objects", path=source)
    return [(f"[{i}]", item) for i, item in enumerate(data)]


def _parses(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _queries(entries: Sequence[tuple[str, Any]], where: Path) -> list[TextPair]:
    out: list[TextPair] = []
    seen: dict[str, str] = {}
    for position, (entry, item) in enumerate(entries):
        a, b, score, pid, category, difficulty = _fields(item, where, entry)
        if pid is None:
            pid = _generated_id(a, b, seen)
        if pid in seen:
            raise SuiteError(
                f"duplicate pair id {pid!r} (first at {seen[pid]})", path=where, entry=entry
            )
        seen[pid] = entry
        out.append(
            TextPair(
                id=pid,
                text=a,
                relevant={},
                category=category,
                difficulty=difficulty,
                position=position,
                text_b=b,
                gold=score,
            )
        )
    return out


def _fields(
    item: Any, where: Path, entry: str
) -> tuple[str, str, float, str | None, str | None, str | None]:
    pid = category = difficulty = None
    if isinstance(item, Mapping):
        unknown = sorted(str(k) for k in item if k not in _OBJECT_KEYS)
        if unknown:
            raise SuiteError(
                f"unknown key {unknown[0]!r}; a pair has a, b, score (and id, category, "
                "difficulty)",
                path=where,
                entry=entry,
            )
        for what, keys in (("text a", _A_KEYS), ("text b", _B_KEYS), ("score", _SCORE_KEYS)):
            given = [k for k in keys if k in item]
            if len(given) > 1:
                # Which one was meant is a guess (a dataset's 0-1 'label' beside its 0-5
                # 'score', say): refused rather than one of them silently read.
                raise SuiteError(
                    f"the pair's {what} is given twice ({given[0]!r} and {given[1]!r}); keep one",
                    path=where,
                    entry=entry,
                )
        a, b, score = (
            next((item[k] for k in keys if k in item), None)
            for keys in (_A_KEYS, _B_KEYS, _SCORE_KEYS)
        )
        raw_id = item.get("id")
        if raw_id is not None:
            if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id):
                raise SuiteError(
                    f"pair id must be a string, got {raw_id!r}", path=where, entry=entry
                )
            pid = str(raw_id)
        category, difficulty = (
            optional_label(item, key, where, entry) for key in ("category", "difficulty")
        )
    elif isinstance(item, (list, tuple)) and len(item) == 3:
        a, b, score = item
    else:
        raise SuiteError(
            "a pair is [text_a, text_b, score] or {a, b, score}", path=where, entry=entry
        )
    for name, text in (("a", a), ("b", b)):
        if not isinstance(text, str) or not text.strip():
            raise SuiteError(f"pair text {name} must be non-empty text", path=where, entry=entry)
    value = _number(score) if isinstance(score, str) else score
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SuiteError(
            f"pair score must be a finite number, got {score!r}", path=where, entry=entry
        )
    return str(a), str(b), float(value), pid, category, difficulty


def _generated_id(a: str, b: str, seen: Mapping[str, str]) -> str:
    # From the texts, not the position: inserting a pair must not rename the others (a baseline
    # compares pairs by id).
    base = "p-" + hashlib.sha1(f"{a.strip()}\t{b.strip()}".encode()).hexdigest()[:10]
    pid, n = base, 2
    while pid in seen:
        pid, n = f"{base}-{n}", n + 1
    return pid


def run_pairs(
    suite: Suite,
    system: SystemConfig,
    context: OpenContext,
) -> RunResult:
    """Embed both texts of every pair (the cache answers what it has) and score each pair by the
    cosine similarity of its two vectors. The result's per-pair ``scores`` hold that cosine;
    pair suites have no query latency (``latency_measured`` is False, as for a stored run, and
    each pair's time is NaN: not timed, ``null`` in the JSON twin)."""
    import numpy as np

    from retrieval_gate.suites.result import RunResult, fingerprint
    from retrieval_gate.systems.embedding import embed_texts, embedding_call, load_system_embedder

    if system.kind != "embedding":
        raise RunError(
            f"pair suites need an embedding system (one with an embedder); system "
            f"{system.name} is kind {system.kind!r}: choose systems with --rg-system",
            path=suite.path,
            entry=f"system {system.name}",
        )
    options = context.options
    embedder = load_system_embedder(system, options, source=context.source)
    pairs = _pairs(suite)
    texts = [p.text for p in pairs] + [p.text_b for p in pairs]
    # Through the embedding boundary: a plug-in's NaN or short result is one line naming it.
    vectors, embedded = embed_texts(
        # The progress line names the suite and system already ("sim x angles: pairs: ...").
        embedder,
        texts,
        options,
        label="pairs",
        call=embedding_call(system),
    )
    n = len(suite.queries)
    a, b = vectors[:n].astype(np.float64), vectors[n:].astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = (a * b).sum(axis=1)
    # A zero vector (an empty encoding) has no direction: its similarity is 0.
    cosine = np.divide(dots, norms, out=np.zeros(n), where=norms > 0)
    from retrieval_gate.embed import model_loaded

    stats = {
        "model_loaded": model_loaded(embedder),
        "pairs": n,
        "embedded_texts": embedded,
        "cached_texts": len(texts) - embedded,
        "dims": int(vectors.shape[1]),
        "latency_measured": False,
    }
    fp = {
        **fingerprint(suite, system, model_identity=embedder.identity),
        "system": dict(system.identity),
    }
    return RunResult(
        suite=suite,
        system=system,
        qids=tuple(q.id for q in suite.queries),
        rankings=tuple(() for _ in suite.queries),
        scores=tuple((float(c),) for c in cosine),
        latencies_ms=tuple(math.nan for _ in suite.queries),
        fingerprint=fp,
        stats=stats,
    )


def _pairs(suite: Suite) -> list[TextPair]:
    return [unit for unit in suite.queries if isinstance(unit, TextPair)]


#: The keys of a pairs suite besides the header.
PAIRS_OPTIONS: OptionTable = {
    "pairs": Option(
        (list, str),
        None,
        "the text pairs and their gold scores (docs/pairs.md), or a file of them",
    )
}


class PairsKind(SuiteKind):
    """Text pairs with a gold similarity, judged by correlation (SPEC 12)."""

    name = "pairs"
    unit = "pair"
    units = "pairs"
    units_key = "pairs"
    options = PAIRS_OPTIONS
    takes_k = False
    inputs = ("pairs",)
    intervals = True

    def parse(self, data: Mapping[str, Any], path: Path) -> tuple[Sequence[Unit], Any]:
        if data["pairs"] is None:
            raise SuiteError(
                f"a {self.name} suite needs '{self.units_key}'", path=path, entry=self.units_key
            )
        return parse_pairs(data["pairs"], path), None

    def corpus(self, suite: Suite, fallback: Path | None, resources: Resources) -> Corpus | None:
        return None  # pairs carry their own texts

    def run(self, suite: Suite, system: SystemConfig, context: OpenContext) -> RunResult:
        return run_pairs(suite, system, context)

    def metric_inputs(
        self, run: RunResult, inputs: set[str], resources: Resources
    ) -> dict[str, object]:
        if "pairs" not in inputs:
            return {}
        import numpy as np

        from retrieval_gate.metrics.pairs import PairInputs

        return {
            "pairs": PairInputs(
                similarity=np.array([s[0] if s else 0.0 for s in run.scores], dtype=np.float64),
                gold=np.array([p.gold for p in _pairs(run.suite)], dtype=np.float64),
            )
        }

    def unit_record(self, run: RunResult, index: int) -> UnitRecord:
        unit = run.suite.queries[index]
        text_b = unit.text_b if isinstance(unit, TextPair) else ""
        return UnitRecord(ranking=(), extras=PairExtras(text_b=text_b))

    def decode_extras(self, data: Mapping[str, Any]) -> PairExtras | None:
        text_b = data.get("text_b")
        return PairExtras(text_b=text_b) if isinstance(text_b, str) else None

    def contributions(
        self, metric: str, ids: Sequence[str], now: RunRecord, then: RunRecord
    ) -> Mapping[str, tuple[float, str]] | None:
        """Each pair's share of the change of Pearson's r or Spearman's rho against gold
        (:func:`~retrieval_gate.metrics.pairs.correlation_shares`): its signed error for
        Pearson, its rank displacement for Spearman; not its cosine's change (a pair whose
        cosine fell may sit closer to its gold now)."""
        import numpy as np

        from retrieval_gate.metrics.pairs import average_ranks, correlation_shares
        from retrieval_gate.records import format_delta, format_value

        family = metric.partition("@")[0]
        if family not in ("pearson", "spearman") or not ids:
            return None

        def series(record: RunRecord, name: str) -> np.ndarray:
            return np.array([record.query(q).metrics.get(name, 0.0) for q in ids])

        s_then, s_now, gold = (
            series(then, "cosine"),
            series(now, "cosine"),
            series(now, "gold_score"),
        )
        found = correlation_shares(s_then, s_now, gold, ranks=family == "spearman")
        if found is None:
            return None
        shares, e_then, e_now = found
        out = {}
        if family == "spearman":
            r_then, r_now, r_gold = (average_ranks(x) for x in (s_then, s_now, gold))
            for i, qid in enumerate(ids):
                out[qid] = (
                    float(shares[i]),
                    f"{qid}: similarity rank {r_then[i]:g} -> {r_now[i]:g} of {len(ids)}, gold "
                    f"rank {r_gold[i]:g} (displacement {abs(r_then[i] - r_gold[i]):g} -> "
                    f"{abs(r_now[i] - r_gold[i]):g}): spearman {format_delta(float(shares[i]))}",
                )
        else:
            for i, qid in enumerate(ids):
                out[qid] = (
                    float(shares[i]),
                    f"{qid}: cosine {format_value(s_then[i])} -> {format_value(s_now[i])}, gold "
                    f"{format_value(gold[i])} (standardised error {e_then[i]:+.2f} -> "
                    f"{e_now[i]:+.2f}): pearson {format_delta(float(shares[i]))}",
                )
        return out

    def explain(self, qid: str, now: QueryRecord, then: QueryRecord, metric: str) -> str:
        """A pair: its cosine before and after, against its gold score."""
        from retrieval_gate.records import format_value

        cosines = f"{format_value(then.metrics['cosine'])} -> {format_value(now.metrics['cosine'])}"
        return f"{qid}: cosine {cosines} (gold score {format_value(now.metrics['gold_score'])})"

    def headline(self, run: RunRecord) -> tuple[str, ...]:
        return ("pearson", "spearman")

    def sections(self, runs: Sequence[RunRecord], metrics: Sequence[str]) -> list[Section]:
        """The pairs whose similarity rank is furthest from their gold rank (what lowers
        Spearman)."""
        from retrieval_gate.records import Section, Table, shorten

        tables = []
        for run in runs:
            rows = []
            for query, gap in furthest(list(run.queries))[:WORST]:
                rows.append(
                    (
                        f"`{query.id}`",
                        shorten(query.text, 40).replace("|", "\\|"),
                        shorten(_text_b(query), 40).replace("|", "\\|"),
                        f"{query.metrics.get('gold_score', 0.0):.4f}",
                        f"{query.metrics.get('cosine', 0.0):.4f}",
                        f"{gap:g}",
                    )
                )
            tables.append(
                Table(
                    header=("pair", "a", "b", "gold", "cosine", "rank gap"),
                    rows=tuple(rows),
                    caption=f"`{run.system}`:",
                )
            )
        return [
            Section(
                title="Pairs furthest from the gold order",
                lines=(
                    "Rank gap: |rank of the similarity - rank of the gold score| among all pairs.",
                ),
                tables=tuple(tables),
            )
        ]

    def failure_lines(
        self, run: RunRecord, metric: str, scope: str, worst: Sequence[str]
    ) -> tuple[str, ...]:
        """No pair is "worst" at a correlation: the pairs of the scope whose similarity rank
        is furthest from their gold rank are what lowered it."""
        from retrieval_gate.records import format_value, shorten

        ids = set(run.scope_ids(scope))
        found = furthest([q for q in run.queries if q.id in ids])[:WORST]
        lines = ["pairs furthest from the gold order (rank gap among the pairs):"] if found else []
        for query, gap in found:
            lines.append(
                f'{query.id} "{shorten(query.text, 40)}" / "{shorten(_text_b(query), 40)}": '
                f"gold {format_value(query.metrics.get('gold_score', 0.0))}, cosine "
                f"{format_value(query.metrics.get('cosine', 0.0))} (rank gap {gap:g})"
            )
        return tuple(lines)


def _text_b(query: QueryRecord) -> str:
    extras = query.extras
    return extras.text_b if isinstance(extras, PairExtras) else ""


def furthest(queries: Sequence[QueryRecord]) -> list[tuple[QueryRecord, float]]:
    """Pairs by |rank of the similarity - rank of the gold score| among ``queries``, largest
    first (ties by id)."""
    import numpy as np

    from retrieval_gate.metrics.pairs import average_ranks

    sims = np.asarray([q.metrics.get("cosine", 0.0) for q in queries], dtype=np.float64)
    golds = np.asarray([q.metrics.get("gold_score", 0.0) for q in queries], dtype=np.float64)
    gaps = np.abs(average_ranks(sims) - average_ranks(golds)) if len(queries) else sims
    order = sorted(range(len(queries)), key=lambda i: (-gaps[i], queries[i].id))
    return [(queries[i], float(gaps[i])) for i in order]


KIND = PairsKind()
