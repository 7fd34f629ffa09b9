"""Ontology tables and similarities on tests/data/ontology/tiny.obo, checked by hand arithmetic.

The fixture's ``is_a`` tree (T:00000NN written as NN), depth in brackets:

    01 All [0]
    ├── 02 Limb [1]
    │   ├── 04 Arm [2] ── 07 Short arm [3] (alt_id 14), 08 Long arm [3]
    │   ├── 05 Leg [2] ── 09 Short leg [3]
    │   └── 11, 12 [3]: each is_a both 04 and 05 (their deepest common ancestors tie: 04 and 05)
    └── 03 Head [1]
        └── 06 Skull [2] ── 10 Small skull [3] (its part_of 04 is not is_a: ignored)
    13 obsolete, replaced_by 07 (its is_a 03 is ignored); 15 obsolete, consider 10

D = 3, N = 12 non-obsolete terms. Descendants (hypo): 01: 11, 02: {04 05 07 08 09 11 12} = 7,
03: {06 10} = 2, 04: {07 08 11 12} = 4, 05: {09 11 12} = 3, 06: {10} = 1, leaves 0.
IC(t) = 1 - log(hypo + 1) / log(12); max IC = 1 (a leaf).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.ontology import (
    Ontology,
    OntologyError,
    OntologyTables,
    UnknownSimilarityError,
    lca,
    load_ontology,
    max_ont_sim,
    max_ont_sim_many,
    pairwise,
    pairwise_indices,
    register_similarity,
    similarity,
    similarity_names,
    similarity_version,
)
from retrieval_gate.ontology import similarities as similarity_module
from retrieval_gate.ontology.tables import FloatArray, IntArray

DATA = Path(__file__).parents[1] / "data" / "ontology"
MEASURES = ("hybrid", "depth", "resnik", "lin", "jc")


def T(n: int) -> str:
    return f"T:{n:07d}"


def ic(hypo: int) -> float:
    return 1 - math.log(hypo + 1) / math.log(12)


IC1, IC2, IC3, IC4, IC5, IC6 = ic(11), ic(7), ic(2), ic(4), ic(3), ic(1)
LEAF = 1.0


@pytest.fixture(scope="module")
def tiny() -> Ontology:
    return load_ontology("tiny.obo", base=DATA, cache_dir=None)


@pytest.fixture(scope="module")
def two_roots() -> Ontology:
    return load_ontology(DATA / "two_roots.obo", base=Path("/nonexistent"), cache_dir=None)


def sim(onto: Ontology, a: str, b: str, measure: str) -> float:
    return float(pairwise(onto, [a], [b], measure)[0, 0])


# --------------------------------------------------------------------------- terms


def test_terms_are_read_as_the_file_states_them(tiny: Ontology) -> None:
    assert tiny.ids == tuple(T(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15))
    short_arm = tiny.terms[T(7)]
    assert short_arm.label == "Short arm"
    assert short_arm.synonyms == ("Arm shortening", "Brachymelia of the arm")
    assert short_arm.definition == "An arm that is shorter than usual for age."
    assert short_arm.alt_ids == (T(14),)
    assert short_arm.parents == (T(4),)
    assert not short_arm.obsolete
    assert tiny.terms[T(1)].definition == ""
    # is_a only: the part_of relationship of 10 is not a parent.
    assert tiny.terms[T(10)].parents == (T(6),)
    assert tiny.terms[T(11)].parents == (T(4), T(5))
    assert tiny.terms[T(13)].obsolete and tiny.terms[T(13)].replaced_by == (T(7),)
    assert tiny.terms[T(15)].consider == (T(10),)
    assert len(tiny.digest) == 64


def test_resolve_maps_alt_ids_and_replaced_obsolete_terms(tiny: Ontology) -> None:
    assert tiny.resolve(T(7)) == (T(7), None)
    assert tiny.resolve(T(14)) == (T(7), f"{T(14)} is an alt_id of {T(7)}")
    assert tiny.resolve(T(13)) == (T(7), f"{T(13)} is obsolete, replaced by {T(7)}")
    assert T(14) in tiny and T(99) not in tiny


def test_resolve_rejects_unknown_and_unreplaced_obsolete_ids(tiny: Ontology) -> None:
    with pytest.raises(OntologyError, match=r"tiny\.obo: unknown term id 'T:0000099'"):
        tiny.resolve(T(99))
    with pytest.raises(
        OntologyError, match=r"T:0000015 is obsolete and has no replacement; consider T:0000010"
    ):
        tiny.resolve(T(15))


def test_documents_are_the_non_obsolete_terms(tiny: Ontology) -> None:
    docs = tiny.documents()
    assert [doc_id for doc_id, _ in docs] == [T(n) for n in range(1, 13)]
    assert docs[6] == (
        T(7),
        {
            "label": "Short arm",
            "synonyms": ("Arm shortening", "Brachymelia of the arm"),
            "definition": "An arm that is shorter than usual for age.",
        },
    )


def test_documents_under_a_root_include_the_root(tiny: Ontology) -> None:
    assert [d for d, _ in tiny.documents(T(5))] == [T(5), T(9), T(11), T(12)]
    assert [d for d, _ in tiny.documents(T(3))] == [T(3), T(6), T(10)]
    assert [d for d, _ in tiny.documents(T(14))] == [T(7)]
    with pytest.raises(OntologyError, match="T:0000099"):
        tiny.documents(T(99))


# --------------------------------------------------------------------------- tables


def test_depth_hypo_and_ic(tiny: Ontology) -> None:
    t = tiny.tables
    expected_depth = {1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 3, 8: 3, 9: 3, 10: 3, 11: 3, 12: 3}
    expected_hypo = {1: 11, 2: 7, 3: 2, 4: 4, 5: 3, 6: 1, 7: 0, 8: 0, 9: 0, 10: 0, 11: 0, 12: 0}
    for n, d in expected_depth.items():
        assert t.depth[tiny.index(T(n))] == d
        assert t.hypo[tiny.index(T(n))] == expected_hypo[n]
        assert t.ic[tiny.index(T(n))] == pytest.approx(ic(expected_hypo[n]))
    assert (t.n_terms, t.max_depth, t.max_ic) == (12, 3, 1.0)
    assert t.ic[tiny.index(T(1))] == 0.0
    # Obsolete terms sit outside the hierarchy; 13's is_a 03 does not make 03 bigger.
    assert t.depth[tiny.index(T(13))] == -1 and list(t.ancestors(tiny.index(T(13)))) == []


def test_ancestors_deepest_first_then_smallest_id(tiny: Ontology) -> None:
    anc = [tiny.ids[i] for i in tiny.tables.ancestors(tiny.index(T(11)))]
    assert anc == [T(11), T(4), T(5), T(2), T(1)]
    assert [tiny.ids[i] for i in tiny.tables.parents(tiny.index(T(12)))] == [T(4), T(5)]


def test_lca_tie_goes_to_the_smallest_id(tiny: Ontology) -> None:
    # 11 and 12 share 04 and 05, both at depth 2: 04 wins. 11's parents are listed 04, 05 and
    # 12's 05, 04: the file order plays no part.
    pairs = [(11, 12), (12, 11), (9, 11), (8, 9), (7, 10), (7, 7), (4, 7)]
    a = np.array([tiny.index(T(x)) for x, _ in pairs])
    b = np.array([tiny.index(T(y)) for _, y in pairs])
    assert [tiny.ids[i] for i in lca(tiny.tables, a, b)] == [
        T(4),
        T(4),
        T(5),
        T(2),
        T(1),
        T(7),
        T(4),
    ]


def _brute_lca(t: OntologyTables, a: int, b: int) -> int:
    common: set[int] = set(t.ancestors(a).tolist()) & set(t.ancestors(b).tolist())
    if not common:
        return -1
    return min(common, key=lambda i: (-int(t.depth[i]), t.ids[i]))


def test_lca_of_every_pair_matches_the_definition(tiny: Ontology) -> None:
    n = len(tiny.ids)
    a, b = (x.ravel() for x in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    got = lca(tiny.tables, a, b)
    assert got.tolist() == [
        _brute_lca(tiny.tables, int(x), int(y)) for x, y in zip(a, b, strict=True)
    ]


# --------------------------------------------------------------------------- similarities


@pytest.mark.parametrize("measure", MEASURES)
def test_identical_terms_score_one(tiny: Ontology, measure: str) -> None:
    assert sim(tiny, T(7), T(7), measure) == 1.0
    assert sim(tiny, T(1), T(1), measure) == 1.0
    # Through an alt id and an obsolete id replaced by 07.
    assert sim(tiny, T(14), T(7), measure) == 1.0
    assert sim(tiny, T(13), T(14), measure) == 1.0


def test_parent_and_child(tiny: Ontology) -> None:
    # lca(04, 07) = 04; depth 2 and 3.
    assert sim(tiny, T(4), T(7), "depth") == pytest.approx(2 / 3)
    assert sim(tiny, T(4), T(7), "hybrid") == pytest.approx(
        0.7 * 2 / 3 + 0.3 * (1 - (2 + 3 - 2 * 2) / (2 + 3))
    )
    assert sim(tiny, T(4), T(7), "resnik") == pytest.approx(IC4 / 1)
    assert sim(tiny, T(4), T(7), "lin") == pytest.approx(2 * IC4 / (IC4 + LEAF))
    assert sim(tiny, T(4), T(7), "jc") == pytest.approx(1 / (1 + IC4 + LEAF - 2 * IC4))


def test_siblings(tiny: Ontology) -> None:
    # lca(07, 08) = 04.
    assert sim(tiny, T(7), T(8), "depth") == pytest.approx(2 / 3)
    assert sim(tiny, T(7), T(8), "hybrid") == pytest.approx(
        0.7 * 2 / 3 + 0.3 * (1 - (3 + 3 - 2 * 2) / (3 + 3))
    )
    assert sim(tiny, T(7), T(8), "resnik") == pytest.approx(IC4)
    assert sim(tiny, T(7), T(8), "lin") == pytest.approx(2 * IC4 / (LEAF + LEAF))
    assert sim(tiny, T(7), T(8), "jc") == pytest.approx(1 / (1 + LEAF + LEAF - 2 * IC4))


def test_cousins(tiny: Ontology) -> None:
    # lca(08, 09) = 02 at depth 1.
    assert sim(tiny, T(8), T(9), "depth") == pytest.approx(1 / 3)
    assert sim(tiny, T(8), T(9), "hybrid") == pytest.approx(
        0.7 * 1 / 3 + 0.3 * (1 - (3 + 3 - 2 * 1) / (3 + 3))
    )
    assert sim(tiny, T(8), T(9), "resnik") == pytest.approx(IC2)
    assert sim(tiny, T(8), T(9), "lin") == pytest.approx(2 * IC2 / 2)
    assert sim(tiny, T(8), T(9), "jc") == pytest.approx(1 / (1 + 2 - 2 * IC2))


def test_disjoint_branches_meet_at_the_root(tiny: Ontology) -> None:
    # lca(07, 10) = 01: depth 0, IC 0.
    assert sim(tiny, T(7), T(10), "depth") == 0.0
    assert sim(tiny, T(7), T(10), "hybrid") == pytest.approx(
        0.7 * 0 / 3 + 0.3 * (1 - (3 + 3 - 2 * 0) / (3 + 3))
    )
    assert sim(tiny, T(7), T(10), "resnik") == 0.0
    assert sim(tiny, T(7), T(10), "lin") == 0.0
    assert sim(tiny, T(7), T(10), "jc") == pytest.approx(1 / (1 + LEAF + LEAF - 2 * IC1))
    # The root and a term below it: hybrid's second part is 1 - (0 + 2 - 0) / (0 + 2) = 0.
    assert sim(tiny, T(1), T(6), "hybrid") == 0.0
    assert sim(tiny, T(1), T(6), "jc") == pytest.approx(1 / (1 + IC1 + IC6 - 2 * IC1))


def test_lca_tie_uses_the_smallest_ids_ic(tiny: Ontology) -> None:
    # lca(11, 12) is 04 (IC4), not 05 (IC5 differs: 05 has 3 descendants, 04 has 4).
    assert not math.isclose(IC4, IC5)
    assert sim(tiny, T(11), T(12), "depth") == pytest.approx(2 / 3)
    assert sim(tiny, T(11), T(12), "hybrid") == pytest.approx(
        0.7 * 2 / 3 + 0.3 * (1 - (3 + 3 - 2 * 2) / (3 + 3))
    )
    assert sim(tiny, T(11), T(12), "resnik") == pytest.approx(IC4)
    assert sim(tiny, T(11), T(12), "lin") == pytest.approx(2 * IC4 / (LEAF + LEAF))
    assert sim(tiny, T(11), T(12), "jc") == pytest.approx(1 / (1 + LEAF + LEAF - 2 * IC4))
    # Without the tie: lca(09, 11) is 05 alone.
    assert sim(tiny, T(9), T(11), "resnik") == pytest.approx(IC5)


# A shortcut makes shortest-path depths disagree with the hierarchy below it (HPO has such
# terms): S:5 and S:7 are is_a both S:4 (depth 3) and the root, so they are at depth 1 while
# their deepest common ancestor S:4 is at depth 3.
#
#     S:1 [0] ── S:2 [1] ── S:3 [2] ── S:4 [3] ── S:8 [4]
#      │                     └── S:9 [3]          │
#      └── (shortcut) S:5 [1], S:7 [1]: each is_a S:4 and S:1;  S:6 [2] is_a S:5
#
# D = 4.
SHORTCUT_OBO = "format-version: 1.2\n" + "".join(
    f"\n[Term]\nid: S:{n}\nname: term {n}\n" + "".join(f"is_a: S:{p}\n" for p in parents)
    for n, parents in {
        1: (),
        2: (1,),
        3: (2,),
        4: (3,),
        5: (4, 1),
        6: (5,),
        7: (4, 1),
        8: (4,),
        9: (3,),
    }.items()
)


@pytest.fixture(scope="module")
def shortcut(tmp_path_factory: pytest.TempPathFactory) -> Ontology:
    folder = tmp_path_factory.mktemp("shortcut")
    (folder / "shortcut.obo").write_text(SHORTCUT_OBO, encoding="utf-8")
    return load_ontology("shortcut.obo", base=folder, cache_dir=None)


def test_shortcut_depths(shortcut: Ontology) -> None:
    depths = {i: int(shortcut.tables.depth[shortcut.index(i)]) for i in shortcut.ids}
    assert depths == {
        "S:1": 0, "S:2": 1, "S:3": 2, "S:4": 3, "S:5": 1, "S:6": 2, "S:7": 1, "S:8": 4, "S:9": 3
    }  # fmt: skip
    assert shortcut.tables.max_depth == 4


def test_hybrid_lca_deeper_than_both_terms_scores_1(shortcut: Ontology) -> None:
    # lca(S:5, S:7) = S:4 at depth 3, both terms at depth 1: dist = 1 + 1 - 2 * 3 = -4 <= 0.
    # Phentrieve's branch: 1. (The formula alone: 0.7 * 3/4 + 0.3 * (1 - (-4)/2) = 1.425.)
    assert sim(shortcut, "S:5", "S:7", "hybrid") == 1.0
    assert pytest.approx(1.425) == 0.7 * 3 / 4 + 0.3 * (1 - (1 + 1 - 2 * 3) / (1 + 1))
    # The other measures are unaffected by the branch: depth = 3/4.
    assert sim(shortcut, "S:5", "S:7", "depth") == pytest.approx(3 / 4)


def test_hybrid_equal_depth_branch_scores_1(shortcut: Ontology) -> None:
    # lca(S:5, S:9) = S:3 (depth 2); depth(S:5) = 1, depth(S:9) = 3: dist = 1 + 3 - 2 * 2 = 0.
    # Phentrieve's branch: 1. (The formula alone: 0.7 * 2/4 + 0.3 * (1 - 0/4) = 0.65.)
    assert sim(shortcut, "S:5", "S:9", "hybrid") == 1.0
    # lca(S:6, S:8) = S:4 (depth 3): dist = 2 + 4 - 2 * 3 = 0: 1 as well.
    assert sim(shortcut, "S:6", "S:8", "hybrid") == 1.0


def test_hybrid_apart_is_the_formula(shortcut: Ontology) -> None:
    # lca(S:9, S:8) = S:3 (depth 2): dist = 3 + 4 - 2 * 2 = 3 > 0.
    assert sim(shortcut, "S:9", "S:8", "hybrid") == pytest.approx(
        0.7 * 2 / 4 + 0.3 * (1 - 3 / (3 + 4))
    )
    # lca(S:6, S:9) = S:3 (depth 2): dist = 2 + 3 - 2 * 2 = 1 > 0.
    assert sim(shortcut, "S:6", "S:9", "hybrid") == pytest.approx(
        0.7 * 2 / 4 + 0.3 * (1 - 1 / (2 + 3))
    )


@pytest.mark.parametrize("measure", MEASURES)
def test_shortcut_never_outscores_an_exact_hit(shortcut: Ontology, measure: str) -> None:
    m = pairwise(shortcut, list(shortcut.ids), list(shortcut.ids), measure)
    assert np.all((m >= 0) & (m <= 1))
    assert max_ont_sim(shortcut, ["S:5"], ["S:7", "S:4"], measure) <= 1.0


@pytest.mark.parametrize("measure", MEASURES)
def test_no_common_ancestor_scores_zero(two_roots: Ontology, measure: str) -> None:
    # R:1 and R:2 are both roots (depth 0): no common ancestor, and hybrid's 0/0 never arises.
    m = pairwise(two_roots, ["R:1", "R:3"], ["R:2", "R:4", "R:3"], measure)
    assert m[0, 0] == 0.0 and m[0, 1] == 0.0 and m[1, 0] == 0.0 and m[1, 1] == 0.0
    assert m[1, 2] == 1.0
    assert two_roots.tables.depth.tolist() == [0, 0, 1, 1]


def test_pairwise_is_a_matrix_and_symmetric(tiny: Ontology) -> None:
    ids = [T(n) for n in range(1, 13)]
    for measure in MEASURES:
        m = pairwise(tiny, ids, ids, measure)
        assert m.shape == (12, 12)
        np.testing.assert_allclose(m, m.T)
        np.testing.assert_array_equal(np.diag(m), np.ones(12))
        assert np.all((m >= 0) & (m <= 1))
    assert pairwise(tiny, [T(7), T(8)], [T(10)], "hybrid").shape == (2, 1)
    assert pairwise(tiny, [], [T(10)], "hybrid").shape == (0, 1)


def test_pairwise_rejects_unknown_ids(tiny: Ontology) -> None:
    with pytest.raises(OntologyError, match="T:0000099"):
        pairwise(tiny, [T(7)], [T(99)], "hybrid")


# --------------------------------------------------------------------------- MaxOntSim


RANKING = [T(10), T(8), T(7), T(9)]


@pytest.mark.parametrize("measure", MEASURES)
def test_max_ont_sim_k_cuts_off_the_exact_match(tiny: Ontology, measure: str) -> None:
    # The expected 07 is at rank 3: with k = 2 the best is its sibling 08 (lca 04), not the
    # root-level 10; k = 1 leaves only 10 (lca 01); k = 3 finds 07 itself.
    siblings = {
        "hybrid": 0.7 * 2 / 3 + 0.3 * (1 - (3 + 3 - 2 * 2) / (3 + 3)),
        "depth": 2 / 3,
        "resnik": IC4,
        "lin": 2 * IC4 / 2,
        "jc": 1 / (1 + 2 - 2 * IC4),
    }
    across = {"hybrid": 0.0, "depth": 0.0, "resnik": 0.0, "lin": 0.0, "jc": 1 / (1 + 2 - 0)}
    assert max_ont_sim(tiny, [T(7)], RANKING[:1], measure) == pytest.approx(across[measure])
    assert max_ont_sim(tiny, [T(7)], RANKING[:2], measure) == pytest.approx(siblings[measure])
    assert max_ont_sim(tiny, [T(7)], RANKING[:3], measure) == 1.0


def test_max_ont_sim_takes_the_best_expected_term(tiny: Ontology) -> None:
    # Expected 09 and 10; retrieved 06: 10's parent (lca 06, depth 2) beats 09 (lca 01).
    assert max_ont_sim(tiny, [T(9), T(10)], [T(6)], "depth") == pytest.approx(2 / 3)
    assert max_ont_sim(tiny, [T(9), T(10)], [T(6)], "lin") == pytest.approx(2 * IC6 / (IC6 + LEAF))


def test_max_ont_sim_edge_cases(tiny: Ontology) -> None:
    assert max_ont_sim(tiny, [T(7)], [], "hybrid") == 0.0
    assert max_ont_sim(tiny, [], [T(7)], "hybrid") == 0.0
    # A retrieved alt id of the expected term is the expected term.
    assert max_ont_sim(tiny, [T(7)], [T(14)], "hybrid") == 1.0
    assert max_ont_sim(tiny, [T(13)], [T(7)], "hybrid") == 1.0
    # Retrieved ids that are no current term are similar to nothing.
    assert max_ont_sim(tiny, [T(7)], ["doc-1", T(15)], "hybrid") == 0.0
    assert max_ont_sim(tiny, [T(7)], ["doc-1", T(8)], "depth") == pytest.approx(2 / 3)
    with pytest.raises(OntologyError, match="T:0000099"):
        max_ont_sim(tiny, [T(99)], [T(7)], "hybrid")


def test_max_ont_sim_many_matches_one_at_a_time(tiny: Ontology) -> None:
    expected = [[T(7)], [T(7)], [T(9), T(10)], [T(1)], [T(7)]]
    retrieved = [RANKING[:2], RANKING[:3], [T(6), T(8)], [], ["doc-1"]]
    for measure in MEASURES:
        many = max_ont_sim_many(tiny, expected, retrieved, measure)
        one = [max_ont_sim(tiny, e, r, measure) for e, r in zip(expected, retrieved, strict=True)]
        np.testing.assert_allclose(many, one)
    with pytest.raises(ValueError, match="2 expected lists for 1 retrieved lists"):
        max_ont_sim_many(tiny, [[T(7)], [T(8)]], [[T(7)]], "hybrid")


# --------------------------------------------------------------------------- registry


def test_registry_names_and_unknown_name() -> None:
    assert similarity_names()[:5] == MEASURES
    with pytest.raises(
        UnknownSimilarityError,
        match=r"unknown similarity 'cosine'; known: hybrid, depth, resnik, lin, jc",
    ):
        similarity("cosine")


def test_registered_similarity_plugs_in(tiny: Ontology, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(similarity_module, "_REGISTRY", dict(similarity_module._REGISTRY))
    monkeypatch.setattr(similarity_module, "_VERSIONS", dict(similarity_module._VERSIONS))
    seen: list[tuple[list[str], list[str], list[str]]] = []

    def lca_depth(t: OntologyTables, a: IntArray, b: IntArray, c: IntArray) -> FloatArray:
        seen.append(([t.ids[i] for i in a], [t.ids[i] for i in b], [t.ids[i] for i in c]))
        return np.asarray(t.depth[c] / 10.0, dtype=np.float64)

    register_similarity("lca_depth", lca_depth)
    assert similarity("lca_depth") is lca_depth
    assert "lca_depth" in similarity_names()
    m = pairwise(tiny, [T(7), T(1)], [T(7), T(8)], "lca_depth")
    # Identical pairs are 1 without calling the function; it sees the other pairs with their lca.
    np.testing.assert_allclose(m, [[1.0, 2 / 10], [0 / 10, 0 / 10]])
    assert seen == [([T(7), T(1), T(1)], [T(8), T(7), T(8)], [T(4), T(1), T(1)])]
    with pytest.raises(ValueError, match="already registered"):
        register_similarity("lca_depth", lca_depth)
    register_similarity("lca_depth", lca_depth, replace=True)
    # Its definition version is recorded with MaxOntSim's; a new one names a changed function.
    assert similarity_version("lca_depth") == "lca_depth/1"
    register_similarity("lca_depth", lca_depth, version="2", replace=True)
    assert similarity_version("lca_depth") == "lca_depth/2"
    assert similarity_version("hybrid") == "hybrid/2"
    with pytest.raises(UnknownSimilarityError):
        similarity_version("cosine")
    with pytest.raises(ValueError, match="version"):
        register_similarity("lca_depth", lca_depth, version="", replace=True)


def test_a_function_can_be_passed_directly(tiny: Ontology) -> None:
    half: Callable[..., np.ndarray] = lambda t, a, b, c: np.full(a.shape[0], 0.5)  # noqa: E731
    a = np.array([tiny.index(T(7)), tiny.index(T(7))])
    b = np.array([tiny.index(T(7)), tiny.index(T(8))])
    assert pairwise_indices(tiny.tables, a, b, half).tolist() == [1.0, 0.5]
