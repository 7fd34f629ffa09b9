"""A keyword retriever over corpus/: BM25 (k1 = 1.2, b = 0.75) on lower-cased words, the kind of
baseline a team compares its embedding model with. ``retrieve(query, k)`` is what the gate calls
(``retriever = "keyword_search:retrieve"``)."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


_DOCS = {path.name: Counter(_words(path.read_text())) for path in sorted(CORPUS.glob("*.txt"))}
_LENGTH = {doc: sum(counts.values()) for doc, counts in _DOCS.items()}
_AVERAGE = sum(_LENGTH.values()) / len(_LENGTH)
_DF = Counter(word for counts in _DOCS.values() for word in counts)


def retrieve(query: str, k: int) -> list[tuple[str, float]]:
    scores = {}
    for doc, counts in _DOCS.items():
        score = 0.0
        for word in set(_words(query)):
            tf = counts.get(word, 0)
            if not tf:
                continue
            idf = math.log(1 + (len(_DOCS) - _DF[word] + 0.5) / (_DF[word] + 0.5))
            norm = tf + 1.2 * (1 - 0.75 + 0.75 * _LENGTH[doc] / _AVERAGE)
            score += idf * tf * 2.2 / norm
        scores[doc] = score
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
