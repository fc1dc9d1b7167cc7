"""The embedding cache: float32 vectors keyed by a clip's sha256 or a prompt, in binary shards.

One folder per model tag (``embeddings-<tag>/`` under the cache folder). Each writing process —
the single process of a run, or each rank of a torchrun run — appends to a shard of its own,
``shard-<rank>.bin``, and every reader loads every shard, so what one run wrote is found by the
next whatever its number of ranks (a re-run with 1 rank re-uses a 4-rank run's vectors).

Shard format (little-endian): a 16-byte header — the magic ``b"EMBVEC1\\0"`` and the vector
length as uint64 — then fixed-size records, each the sha256 of the key string (32 bytes), the
vector (float32 × length) and the CRC-32 of those two. A shard is read with one memory map
(``numpy.memmap``); a record whose CRC does not match (a power cut's zeros) is skipped, and a
torn tail — the part of a record a killed writer left — is not a whole record, so it is never
read, and its writer cuts it off before appending again. Each record is written and flushed as
its batch finishes, and fsynced at least every second, so a killed run keeps every vector it
finished. When a key is in several records, the last one in the last shard (by name) wins.

One writer per shard: a shard is locked while open (``<shard>.lock``, holding the pid); a second
run on the same cache and rank is refused (bad input) rather than interleaving its appends.

Migration: the JSONL cache of earlier versions (``embeddings-<tag>.jsonl``, base64 float32) is
read once, when the folder has no shard yet, into ``shard-migrated.bin``; the JSONL file is left
as it was (it can be deleted) and never read again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from .cache import lock_exclusively

MAGIC = b"EMBVEC1\0"
HEADER_BYTES = 16


def record_dtype(dim: int) -> np.dtype:
    """One record: key digest, vector, CRC-32 (packed, little-endian)."""
    return np.dtype([("key", "V32"), ("vector", "<f4", (dim,)), ("crc", "<u4")])


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def shard_layout(fh) -> tuple[int, int] | None:
    """(vector length, whole records) of the open shard ``fh``; None for a file that is not a
    shard (too short for its header, or another magic). A torn tail is not a whole record."""
    fh.seek(0)
    header = fh.read(HEADER_BYTES)
    if len(header) < HEADER_BYTES or header[:8] != MAGIC:
        return None
    dim = int.from_bytes(header[8:], "little")
    size = fh.seek(0, os.SEEK_END)
    return dim, (size - HEADER_BYTES) // record_dtype(dim).itemsize


def read_shard(path: Path, first: int = 0) -> tuple[list[bytes], np.ndarray] | None:
    """The keys and vectors of one shard's whole records from the ``first`` on whose CRC
    matches, memory-mapped; None for a file that is not a shard."""
    with open(path, "rb") as f:
        layout = shard_layout(f)
    if layout is None:
        return None
    dim, whole = layout
    dtype, count = record_dtype(dim), whole - first
    if dim == 0 or count <= 0:
        return [], np.zeros((0, dim), dtype=np.float32)
    records = np.memmap(path, dtype=dtype, mode="r", offset=HEADER_BYTES + first * dtype.itemsize, shape=(count,))
    raw = records.view(np.uint8).reshape(count, dtype.itemsize)
    body = dtype.itemsize - 4
    good = np.fromiter((zlib.crc32(row[:body]) for row in raw), dtype=np.uint32, count=count) == records["crc"]
    keys = [bytes(k) for k in records["key"][good]]
    return keys, records["vector"][good]


class VectorStore:
    """Key → float32 vector, over every shard in ``folder``; this process appends to shard
    ``writer``. ``fresh``: load nothing that was there when the store was opened (new vectors are
    still written, and a reload reads what other ranks wrote since)."""

    def __init__(self, folder: Path, writer: int | str = 0, fresh: bool = False, sync_seconds: float = 1.0):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"shard-{writer}.bin"
        self._lock_fh = lock_exclusively(self.path)
        self.fresh, self.sync_seconds = fresh, sync_seconds
        self._fh = None
        self._dim: int | None = None
        self._last_sync = time.monotonic()
        self.failed: OSError | None = None
        self.index: dict[bytes, tuple[int, int]] = {}
        self._arrays: list[np.ndarray] = []
        self._opened_at = {}  # whole records in each shard when opened: what --fresh skips on a reload
        for path in self._shards():
            with open(path, "rb") as f:
                self._opened_at[path.name] = (shard_layout(f) or (0, 0))[1]
        self.reload()

    def _shards(self) -> list[Path]:
        return sorted(self.folder.glob("shard-*.bin"))

    def reload(self) -> None:
        """Read every shard again (another rank's vectors, once it has finished)."""
        self.index, self._arrays, self.loaded = {}, [], 0
        for path in self._shards():
            try:
                shard = read_shard(path, self._opened_at.get(path.name, 0) if self.fresh else 0)
            except OSError:
                continue
            if shard is None:
                continue
            keys, vectors = shard
            self._arrays.append(vectors)
            for row, key in enumerate(keys):
                self.index[key] = (len(self._arrays) - 1, row)
        self.loaded = len(self.index)

    def get(self, key: str):
        """The vector for ``key`` (a read-only float32 view) or None."""
        where = self.index.get(key_digest(key))
        return None if where is None else self._arrays[where[0]][where[1]]

    def put_many(self, keys: list[str], vectors) -> None:
        """Append one record per key and flush. A file that cannot be written (a full disk)
        stops the appending, not the run: one line on stderr says so, and a later run embeds
        again what was not saved."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if not keys:
            return
        if self._dim is None:
            self._open(vectors.shape[1])
        if vectors.shape[1] != self._dim:
            raise ValueError(f"{self.path}: vectors of length {vectors.shape[1]}, the shard holds {self._dim}")
        dtype = record_dtype(self._dim)
        records = np.zeros(len(keys), dtype=dtype)
        records["key"] = [np.void(key_digest(k)) for k in keys]
        records["vector"] = vectors
        raw = records.view(np.uint8).reshape(len(keys), dtype.itemsize)
        records["crc"] = [zlib.crc32(row[:-4]) for row in raw]
        self._arrays.append(records["vector"])
        for row, key in enumerate(keys):
            self.index[key_digest(key)] = (len(self._arrays) - 1, row)
        if self.failed is not None:
            return
        try:
            self._fh.write(records.tobytes())
            self._fh.flush()
            if time.monotonic() - self._last_sync >= self.sync_seconds:
                os.fsync(self._fh.fileno())
                self._last_sync = time.monotonic()
        except OSError as e:
            self.failed = e
            print(f"{self.path}: cannot be written ({e.strerror or e}); the run goes on without saving embeddings "
                  "there, and a re-run will embed them again", file=sys.stderr)

    def _open(self, dim: int) -> None:
        """Open this writer's shard for appending: write the header of a new (or headerless)
        shard, cut a torn tail off an old one; a shard of another vector length is bad input."""
        from .errors import InputError

        self._dim = dim
        fh = open(self.path, "r+b" if self.path.exists() else "w+b")
        layout = shard_layout(fh)
        if layout is None:
            fh.seek(0)
            fh.truncate()
            fh.write(MAGIC + dim.to_bytes(8, "little"))
        elif layout[0] != dim:
            fh.close()
            raise InputError(self.path, f"holds vectors of length {layout[0]}, this model gives {dim}: it is not this "
                                        "model's cache (delete it, or use another --cache-dir)")
        else:  # a killed writer's torn record: cut it off, so the next one starts whole
            fh.truncate(HEADER_BYTES + layout[1] * record_dtype(dim).itemsize)
        fh.seek(0, os.SEEK_END)
        self._fh = fh

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except OSError as e:
                if self.failed is None:
                    print(f"{self.path}: cannot be written ({e.strerror or e}); its last embeddings were not saved",
                          file=sys.stderr)
                self.failed = e
            finally:
                try:
                    self._fh.close()
                except OSError:
                    pass
        if self._lock_fh is not None and not self._lock_fh.closed:
            self._lock_fh.close()


def migrate_jsonl(jsonl: Path, folder: Path) -> int:
    """Copy the vectors of an earlier version's JSONL cache into ``folder/shard-migrated.bin``
    when ``folder`` has no shard yet; returns how many were copied (lines that do not decode, a
    torn last line among them, are skipped as before)."""
    if not jsonl.is_file() or any(Path(folder).glob("shard-*.bin")):
        return 0
    keys, vectors = [], []
    with open(jsonl, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
                vector = np.frombuffer(base64.b64decode(rec["v"]), dtype=np.float32)
                key = rec["k"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(key, str) and vector.size and (not vectors or vector.size == vectors[0].size):
                keys.append(key)
                vectors.append(vector)
    if keys:
        store = VectorStore(folder, writer="migrated")
        try:
            store.put_many(keys, np.stack(vectors))
        finally:
            store.close()
    return len(keys)
