"""The typed records that flow from a run to the report: what was measured and what was decided.

Each stage builds its record once and never changes it afterwards:

* :class:`RunRecord` (with its :class:`QueryRecord`\\ s and :class:`GroupRecord`\\ s): one suite x
  system as measured, built by the evaluation stage (:mod:`.run`);
* :class:`Outcome`: one item's decision, as plain data: the rule that decided it, its figures
  (a comparison with the baseline's in :class:`RegressionFigures`) (:mod:`.outcome`);
* :class:`BaselineComparison`: how a run lines up with the accepted baseline and what each
  regression check found (:mod:`.comparison`);
* :class:`Section` and :class:`Table`: what a suite kind adds to the report (:mod:`.sections`);
* :class:`ItemPayload`: what an item hands the session, the xdist transport (:mod:`.transport`).

JSON exists only at the edges (the report's JSON twin, the ledger's files, the xdist transport),
and each type has one serializer pair (``to_json`` / ``from_json``). The ledger (the accepted
baseline and the history, baseline/) keeps a run in its own compact form (queries keyed by id,
at a detail level: rankings for the baseline, values for a history entry, figures only once
compacted): :meth:`RunRecord.to_ledger_json` and :meth:`RunRecord.from_ledger_json` are the one
codec of a run there. What both forms share (each suite
kind's codec of its extras, the drift rankings) is :mod:`.codecs`; how values and scopes are
written in messages, :mod:`.wording`. Importers use this package's names.

This package imports nothing heavy: the xdist controller builds the report from these records
without numpy.
"""

from __future__ import annotations

from retrieval_gate.records.codecs import KindCodec, RawExtras, UnitExtras, register_kind_codec
from retrieval_gate.records.comparison import BaselineComparison, RegressionRow
from retrieval_gate.records.outcome import Outcome, RegressionFigures
from retrieval_gate.records.run import (
    DEFAULT_KIND,
    GroupRecord,
    HoldoutRecord,
    QueryRecord,
    RunFailure,
    RunRecord,
    query_digest,
)
from retrieval_gate.records.sections import Section, Table
from retrieval_gate.records.transport import ItemPayload, Undecided
from retrieval_gate.records.wording import (
    counted,
    format_delta,
    format_value,
    parse_scope,
    plural,
    resolution_words,
    resolves_nothing,
    scope_name,
    shorten,
    shown_id,
)

__all__ = [
    "DEFAULT_KIND",
    "BaselineComparison",
    "GroupRecord",
    "HoldoutRecord",
    "ItemPayload",
    "KindCodec",
    "Outcome",
    "QueryRecord",
    "RawExtras",
    "RegressionFigures",
    "RegressionRow",
    "RunFailure",
    "RunRecord",
    "Section",
    "Table",
    "Undecided",
    "UnitExtras",
    "counted",
    "format_delta",
    "format_value",
    "parse_scope",
    "plural",
    "query_digest",
    "register_kind_codec",
    "resolution_words",
    "resolves_nothing",
    "scope_name",
    "shorten",
    "shown_id",
]
