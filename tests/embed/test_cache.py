from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.embed.cache import MAX_SHARDS, EmbeddingCache
from retrieval_gate.errors import CacheWarning

IDENTITY = 'retrieval-gate-embedder/1 {"kind":"test","model":"m"}'


def _vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _digests(texts: list[str]) -> list[str]:
    return [EmbeddingCache.digest(t) for t in texts]


def test_digest_is_sha256_of_the_text() -> None:
    assert (
        EmbeddingCache.digest("query: héllo") == hashlib.sha256("query: héllo".encode()).hexdigest()
    )


def test_layout_is_identity_hash_with_identity_file(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    expected = tmp_path / hashlib.sha256(IDENTITY.encode()).hexdigest()[:16]
    assert cache.directory == expected
    assert (expected / "identity.txt").read_text() == IDENTITY + "\n"


def test_store_then_lookup_hits(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    digests = _digests(["a", "b", "c"])
    vectors = _vectors(3)
    cache.store(digests, vectors)
    found, missing = cache.lookup(digests)
    assert missing == []
    assert found.dtype == np.float32
    np.testing.assert_array_equal(found, vectors)
    # A second instance (another process, a later run) reads the same shard.
    found_again, missing_again = EmbeddingCache(tmp_path, IDENTITY).lookup(digests[::-1])
    assert missing_again == []
    np.testing.assert_array_equal(found_again, vectors[::-1])


def test_partial_hits_report_missing_positions(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    vectors = _vectors(2)
    cache.store(_digests(["a", "c"]), vectors)
    found, missing = cache.lookup(_digests(["a", "b", "c", "d"]))
    assert missing == [1, 3]
    # Found rows follow the order of the found digests: a (position 0), then c (position 2).
    np.testing.assert_array_equal(found, vectors)


def test_empty_cache_and_other_identity_miss(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    found, missing = cache.lookup(_digests(["a", "b"]))
    assert found.shape == (0, 0)
    assert missing == [0, 1]
    cache.store(_digests(["a"]), _vectors(1))
    found, missing = cache.lookup(_digests(["z"]))
    assert found.shape == (0, 8)
    assert missing == [0]
    other = EmbeddingCache(tmp_path, IDENTITY + " prompt changed")
    assert other.directory != cache.directory
    assert other.lookup(_digests(["a"]))[1] == [0]


def test_store_rejects_bad_input(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    with pytest.raises(ValueError, match="2 digests and vectors of shape"):
        cache.store(_digests(["a", "b"]), _vectors(3))
    with pytest.raises(ValueError, match="NaN"):
        cache.store(_digests(["a"]), np.full((1, 8), np.nan, dtype=np.float32))
    cache.store(_digests(["a"]), _vectors(1))
    with pytest.raises(ValueError, match="dimension 4, the cache holds 8"):
        cache.store(_digests(["b"]), _vectors(1, dim=4))
    cache.store([], np.zeros((0, 8), dtype=np.float32))
    assert len(cache.shard_paths()) == 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flipped-byte", "foreign"])
def test_damaged_shard_warns_is_deleted_and_rebuilt(tmp_path: Path, damage: str) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    digests = _digests(["a", "b", "c"])
    vectors = _vectors(3)
    cache.store(digests, vectors)
    (shard,) = cache.shard_paths()
    data = shard.read_bytes()
    if damage == "truncate":
        shard.write_bytes(data[: shard.stat().st_size // 2])
    elif damage == "garbage":
        shard.write_bytes(b"not a zip file")
    elif damage == "flipped-byte":
        # One bit of the vectors' last float: still a zip, still an array, another value.
        at = data.index(vectors.tobytes()) + vectors.nbytes - 1
        shard.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :])
    else:  # the same texts' shard of another model (same width), copied into this folder
        other = EmbeddingCache(tmp_path / "other", IDENTITY + " (another model)")
        other.store(digests, vectors[::-1].copy())
        (foreign,) = other.shard_paths()
        shard.write_bytes(foreign.read_bytes())
    fresh = EmbeddingCache(tmp_path, IDENTITY)
    with pytest.warns(CacheWarning, match=rf"shard .*{shard.name} is unreadable") as caught:
        found, missing = fresh.lookup(digests)
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    assert missing == [0, 1, 2]
    assert found.shape[0] == 0
    assert not shard.exists()
    fresh.store(digests, vectors)
    found, missing = EmbeddingCache(tmp_path, IDENTITY).lookup(digests)
    assert missing == []
    np.testing.assert_array_equal(found, vectors)


def test_shard_of_another_size_than_the_embedder_is_damaged_and_re_embedded(
    tmp_path: Path,
) -> None:
    # A shard of 3-wide vectors under an identity whose embedder now gives 8 (a model file
    # replaced in place): re-embedded, never a numpy shape error in the caller.
    digests = _digests(["a", "b"])
    EmbeddingCache(tmp_path, IDENTITY).store(digests, _vectors(2, dim=3))
    cache = EmbeddingCache(tmp_path, IDENTITY, dim=8)
    (shard,) = cache.shard_paths()
    with pytest.warns(
        CacheWarning, match=rf"{shard.name} is unreadable \(dimension 3, the embedder gives 8\)"
    ):
        found, missing = cache.lookup(digests)
    assert missing == [0, 1]
    assert found.shape == (0, 8)
    assert not shard.exists()
    cache.store(digests, _vectors(2))
    found, missing = EmbeddingCache(tmp_path, IDENTITY, dim=8).lookup(digests)
    assert missing == []
    np.testing.assert_array_equal(found, _vectors(2))


def test_temporary_files_are_ignored(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    cache.store(_digests(["a"]), _vectors(1))
    # What a writer killed mid-write leaves behind: never listed, never warned about.
    (cache.directory / ".tmp-deadbeef.npz").write_bytes(b"half a shard")
    found, missing = EmbeddingCache(tmp_path, IDENTITY).lookup(_digests(["a"]))
    assert missing == []
    assert found.shape == (1, 8)


def test_compaction_keeps_all_entries(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    texts = [f"text {i}" for i in range(40)]
    vectors = _vectors(40)
    for i, text in enumerate(texts):
        cache.store(_digests([text]), vectors[i : i + 1])
    # Store number MAX_SHARDS + 1 compacts everything into one shard; 7 more follow it.
    assert MAX_SHARDS == 32
    assert len(cache.shard_paths()) == 1 + (40 - 33)
    found, missing = EmbeddingCache(tmp_path, IDENTITY).lookup(_digests(texts))
    assert missing == []
    np.testing.assert_array_equal(found, vectors)


def test_compact_merges_duplicates(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    vectors = _vectors(2)
    cache.store(_digests(["a", "b"]), vectors)
    cache.store(_digests(["b"]), vectors[1:])
    cache.compact()
    (shard,) = cache.shard_paths()
    with np.load(shard, allow_pickle=False) as data:
        assert sorted(data["digests"].tolist()) == sorted(_digests(["a", "b"]))
    found, missing = cache.lookup(_digests(["b", "a"]))
    assert missing == []
    np.testing.assert_array_equal(found, vectors[::-1])


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import numpy as np
    from retrieval_gate.embed.cache import EmbeddingCache

    root, identity, worker = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    cache = EmbeddingCache(root, identity)
    for batch in range(40):
        texts = [f"w{worker} b{batch} i{i}" for i in range(5)]
        vectors = np.array(
            [[worker, batch, i, 1.0] for i in range(5)], dtype=np.float32
        )
        cache.store([EmbeddingCache.digest(t) for t in texts], vectors)
        cache.lookup([EmbeddingCache.digest(t) for t in texts])
    """
)


def test_two_processes_storing_at_once(tmp_path: Path) -> None:
    # 2 x 40 stores of 5 entries: both writers pass the compaction threshold several times,
    # so compactions race with each other and with the other writer's stores.
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "error", "-c", WRITER, str(tmp_path), IDENTITY, str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in (1, 2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    texts = [f"w{w} b{b} i{i}" for w in (1, 2) for b in range(40) for i in range(5)]
    cache = EmbeddingCache(tmp_path, IDENTITY)
    found, missing = cache.lookup(_digests(texts))
    assert missing == []
    expected = np.array(
        [[w, b, i, 1.0] for w in (1, 2) for b in range(40) for i in range(5)], dtype=np.float32
    )
    np.testing.assert_array_equal(found, expected)
    assert list(cache.directory.glob(".tmp-*")) == []
    assert len(cache.shard_paths()) <= MAX_SHARDS + 1


def test_lookup_across_shards_keeps_the_asked_order(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    first, second = _vectors(3, seed=1), _vectors(2, seed=2)
    cache.store(_digests(["a0", "a1", "a2"]), first)
    cache.store(_digests(["b0", "b1"]), second)
    found, missing = cache.lookup(_digests(["b1", "a0", "nope", "a2", "b0"]))
    assert missing == [2]
    np.testing.assert_array_equal(found, np.stack([second[1], first[0], first[2], second[0]]))
    found[0] = 0.0  # a gathered copy: changing it changes nothing cached
    again, _ = EmbeddingCache(tmp_path, IDENTITY).lookup(_digests(["b1"]))
    np.testing.assert_array_equal(again[0], second[1])


def test_lookup_of_one_whole_shard_in_order_is_that_shard_read_only(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, IDENTITY)
    vectors = _vectors(4)
    cache.store(_digests(["w", "x", "y", "z"]), vectors)
    found, missing = cache.lookup(_digests(["w", "x", "y", "z"]))
    assert missing == []
    np.testing.assert_array_equal(found, vectors)
    assert not found.flags.writeable
    again, _ = cache.lookup(_digests(["w", "x", "y", "z"]))
    assert np.shares_memory(found, again)
    # Any other order, or a part, is gathered into a new array.
    part, _ = cache.lookup(_digests(["x", "w"]))
    assert part.flags.writeable and not np.shares_memory(part, found)
    np.testing.assert_array_equal(part, vectors[[1, 0]])


def test_a_warm_cache_checks_the_width_the_model_gave(tmp_path: Path) -> None:
    # A cold run (the model says 8) records the width; a shard of another width appearing
    # later is dropped by a warm run that loads no model (dim unknown), not taken as the truth.
    cold = EmbeddingCache(tmp_path, IDENTITY, 8)
    cold.store(_digests(["a", "b"]), _vectors(2, dim=8))
    assert (cold.directory / "width.txt").read_text() == "8\n"
    np.savez(
        cold.directory / "shard-0000.npz",
        digests=np.array(_digests(["c"]), dtype=str),
        vectors=_vectors(1, dim=3),
    )
    warm = EmbeddingCache(tmp_path, IDENTITY)
    with pytest.warns(
        CacheWarning, match=r"dimension 3, the model gave when the cache was filled 8"
    ):
        found, missing = warm.lookup(_digests(["a", "b", "c"]))
    assert found.shape == (2, 8) and missing == [2]
    assert warm.dropped == ["dimension 3, the model gave when the cache was filled 8"]
    assert not (cold.directory / "shard-0000.npz").exists()


def test_a_cache_folder_that_cannot_be_made_warns_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.warns(CacheWarning, match=r"cannot be written \(Read-only file system\)"):
        cache = EmbeddingCache(tmp_path / "ro", IDENTITY)
    cache.store(_digests(["a"]), _vectors(1))  # nothing to store to, nothing raised
    monkeypatch.undo()
    assert not (tmp_path / "ro").exists()
    found, missing = cache.lookup(_digests(["a"]))
    assert found.shape[0] == 0 and missing == [0]
