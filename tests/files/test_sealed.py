"""Sealed cache entries and files records (files/sealed.py): what each damage reads back as."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from retrieval_gate.errors import CacheWarning
from retrieval_gate.files.sealed import (
    check_files_record,
    read_sealed,
    write_files_record,
    write_sealed,
)
from tests.damage import DAMAGES, damage


def _check(record: Path, key: str = "k") -> object:
    return check_files_record(record, key, what="thing", again="making it again")


def test_a_sealed_entry_reads_back_bit_for_bit(tmp_path: Path) -> None:
    payload = {"score": 0.1 + 0.2, "ids": ["a", "b"]}
    write_sealed(tmp_path / "e.json", "key", payload)
    assert read_sealed(tmp_path / "e.json", "key", what="entry") == payload
    assert read_sealed(tmp_path / "absent.json", "key", what="entry") is None


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_sealed_entry_is_one_warning_and_nothing(tmp_path: Path, how: str) -> None:
    write_sealed(tmp_path / "e.json", "mine", {"x": [1.5, 2.5, 3.5]})
    write_sealed(tmp_path / "other.json", "theirs", {"x": [1.5, 2.5, 3.5]})
    damage(tmp_path / "e.json", how, foreign=tmp_path / "other.json")
    with pytest.warns(CacheWarning) as caught:
        assert read_sealed(tmp_path / "e.json", "mine", what="entry", again="redo") is None
    (warning,) = caught
    assert str(warning.message).startswith(f"entry {tmp_path / 'e.json'} was not used: ")
    assert str(warning.message).endswith("; redo")


def test_a_files_record_vouches_for_whole_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    files = [tmp_path / "a.bin", tmp_path / "sub" / "b.bin"]
    for i, file in enumerate(files):
        file.write_bytes(bytes(range(i, 200)))
    write_files_record(tmp_path / "record.json", "k", files, extra={"build": "b1"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _check(tmp_path / "record.json") == [{"build": "b1"}]
        # No record: files written before records were kept, or never finished; unsaid.
        assert _check(tmp_path / "none.json") is None


@pytest.mark.parametrize("how", [*DAMAGES, "missing"])
def test_a_file_unlike_its_record_is_named_in_one_warning(tmp_path: Path, how: str) -> None:
    (tmp_path / "a.bin").write_bytes(bytes(range(256)))
    (tmp_path / "other.bin").write_bytes(bytes(range(255, -1, -1)))
    write_files_record(tmp_path / "record.json", "k", [tmp_path / "a.bin"])
    if how == "missing":
        (tmp_path / "a.bin").unlink()
    else:
        damage(tmp_path / "a.bin", how, foreign=tmp_path / "other.bin")
    with pytest.warns(CacheWarning) as caught:
        assert _check(tmp_path / "record.json") is None
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith(f"thing {tmp_path / 'a.bin'} was not used: ")
    reason = "cannot be read" if how == "missing" else "does not match the digest in record.json"
    assert reason in message and message.endswith("; making it again")


def test_a_record_of_another_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"weights")
    write_files_record(tmp_path / "record.json", "another", [tmp_path / "a.bin"])
    with pytest.warns(CacheWarning, match=r"thing record .* holds another entry's data"):
        assert _check(tmp_path / "record.json") is None


def test_a_record_checked_before_is_hashed_again_only_when_a_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run asks for a chroma build id once per query batch: a big graph is not hashed each time.
    import retrieval_gate.files.sealed as sealed

    (tmp_path / "a.bin").write_bytes(b"graph")
    write_files_record(tmp_path / "record.json", "k", [tmp_path / "a.bin"], extra=1)
    hashed: list[Path] = []
    digest = sealed.file_digest

    def counted(path: Path) -> str:
        hashed.append(path)
        return digest(path)

    monkeypatch.setattr(sealed, "file_digest", counted)
    assert _check(tmp_path / "record.json") == [1]
    assert _check(tmp_path / "record.json") == [1]
    assert hashed == [tmp_path / "a.bin"]
    damage(tmp_path / "a.bin", "flipped-byte")
    with pytest.warns(CacheWarning, match="does not match the digest"):
        assert _check(tmp_path / "record.json") is None
