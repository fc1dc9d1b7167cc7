"""The binary embedding cache (emolia_bench.vector_store): the on-disk format read back with
struct and hashlib (not with the module's own reader), torn tails and corrupt records, which
record wins, a writer per shard, and the migration of the earlier JSONL cache."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import zlib

import numpy as np
import pytest

from emolia_bench.errors import InputError
from emolia_bench.vector_store import VectorStore, migrate_jsonl


def vectors(n: int, dim: int = 4, offset: float = 0.0) -> np.ndarray:
    return (np.arange(n * dim, dtype=np.float32).reshape(n, dim) + offset) / 7


def test_the_shard_format_is_header_then_key_digest_vector_crc_records(tmp_path):
    store = VectorStore(tmp_path / "e")
    store.put_many(["t:alpha", "a:beta"], vectors(2))
    store.close()
    raw = (tmp_path / "e" / "shard-0.bin").read_bytes()
    # by hand: 8-byte magic, uint64 length 4, then 2 records of 32 + 4*4 + 4 = 52 bytes
    assert raw[:8] == b"EMBVEC1\0" and struct.unpack("<Q", raw[8:16]) == (4,) and len(raw) == 16 + 2 * 52
    second = raw[16 + 52:]
    assert second[:32] == hashlib.sha256(b"a:beta").digest()
    assert struct.unpack("<4f", second[32:48]) == tuple(np.float32(v) for v in vectors(2)[1])
    assert struct.unpack("<I", second[48:52]) == (zlib.crc32(second[:48]),)


def test_a_torn_tail_is_ignored_and_cut_off_before_the_next_append(tmp_path):
    store = VectorStore(tmp_path / "e")
    store.put_many(["a", "b", "c"], vectors(3))
    store.close()
    shard = tmp_path / "e" / "shard-0.bin"
    with open(shard, "ab") as f:
        f.write(b"\x01" * 30)  # a killed writer's partial record
    reader = VectorStore(tmp_path / "e", writer=1)
    assert reader.loaded == 3 and reader.get("c").tolist() == vectors(3)[2].tolist() and reader.get("d") is None
    reader.close()
    writer = VectorStore(tmp_path / "e")
    writer.put_many(["d"], vectors(1, offset=100))
    writer.close()
    assert shard.stat().st_size == 16 + 4 * 52  # the fragment is gone, the new record whole
    again = VectorStore(tmp_path / "e")
    assert again.loaded == 4 and again.get("d").tolist() == vectors(1, offset=100)[0].tolist()
    again.close()


def test_a_record_whose_crc_does_not_match_is_skipped(tmp_path):
    store = VectorStore(tmp_path / "e")
    store.put_many(["a", "b", "c"], vectors(3))
    store.close()
    shard = tmp_path / "e" / "shard-0.bin"
    raw = bytearray(shard.read_bytes())
    raw[16 + 52 + 40] ^= 0xFF  # a byte inside b's vector
    shard.write_bytes(bytes(raw))
    reader = VectorStore(tmp_path / "e")
    assert reader.loaded == 2 and reader.get("b") is None and reader.get("a") is not None and reader.get("c") is not None
    reader.close()


def test_the_last_record_of_the_last_shard_wins_and_fresh_loads_nothing(tmp_path):
    for writer, offset in ((1, 10.0), (0, 0.0)):  # shard-1 written last in time, but sorts after shard-0 by name
        store = VectorStore(tmp_path / "e", writer=writer)
        store.put_many(["k"], vectors(1, offset=offset))
        store.close()
    store = VectorStore(tmp_path / "e", writer=0)
    assert store.get("k").tolist() == vectors(1, offset=10.0)[0].tolist()
    store.put_many(["k"], vectors(1, offset=20.0))  # later in shard-0: still shard-1's on reload
    store.close()
    store = VectorStore(tmp_path / "e", writer=2)
    assert store.get("k").tolist() == vectors(1, offset=10.0)[0].tolist()
    store.close()
    fresh = VectorStore(tmp_path / "e", fresh=True)
    assert fresh.loaded == 0 and fresh.get("k") is None
    fresh.close()


def test_one_writer_per_shard_and_one_vector_length(tmp_path):
    first = VectorStore(tmp_path / "e")
    with pytest.raises(InputError, match="in use by another running process"):
        VectorStore(tmp_path / "e")
    other = VectorStore(tmp_path / "e", writer=1)  # another rank's shard is free
    first.put_many(["a"], vectors(1))
    first.close()
    other.close()
    again = VectorStore(tmp_path / "e")
    with pytest.raises(InputError, match="vectors of length 4"):
        again.put_many(["b"], vectors(1, dim=8))
    again.close()


def test_the_jsonl_cache_of_earlier_versions_is_migrated_once(tmp_path):
    jsonl = tmp_path / "embeddings-tag.jsonl"
    vs = vectors(3)
    lines = [json.dumps({"k": k, "v": base64.b64encode(v.tobytes()).decode()}) for k, v in zip("abc", vs, strict=True)]
    jsonl.write_text("\n".join(lines) + "\n" + '{"k": "d", "v": "AAA')  # the earlier format, with a torn last line
    folder = tmp_path / "embeddings-tag"
    assert migrate_jsonl(jsonl, folder) == 3
    store = VectorStore(folder)
    assert store.loaded == 3 and store.get("b").tolist() == vs[1].tolist()
    store.close()
    assert migrate_jsonl(jsonl, folder) == 0  # the folder has shards now: never read again
    assert jsonl.read_text().startswith(lines[0])  # and the JSONL file is left as it was


def test_a_fresh_store_reads_only_what_was_written_after_it_opened(tmp_path):
    # what torchrun's rank 0 does with --fresh: ignore the old vectors, read the other ranks' new ones
    old = VectorStore(tmp_path / "e", writer=1)
    old.put_many(["k", "old-only"], vectors(2))
    old.close()
    fresh = VectorStore(tmp_path / "e", writer=0, fresh=True)
    assert fresh.loaded == 0
    other_rank = VectorStore(tmp_path / "e", writer=1, fresh=True)
    other_rank.put_many(["k"], vectors(1, offset=50))  # appended to shard-1 after the old records
    other_rank.close()
    fresh.reload()
    assert fresh.loaded == 1 and fresh.get("old-only") is None
    assert fresh.get("k").tolist() == vectors(1, offset=50)[0].tolist()
    fresh.close()
