"""Extraction suites (SPEC section 11): documents with the terms a reader should find in them.

A system chunks each document (:mod:`.chunking`), retrieves terms per chunk through the normal
system protocol, and aggregates the per-chunk hits into the document's predicted set
(:mod:`.aggregate`); :mod:`.documents` loads the suite's documents, :mod:`.settings` declares the
per-system ``extraction`` settings and :mod:`.run` runs a suite. The metrics are in
:mod:`retrieval_gate.metrics.extraction`. Nothing here is imported without ``--retrieval-gate``.
"""
