"""An append-only on-disk cache of endpoint responses, so an interrupted run resumes.

One JSONL file per model tag under the cache folder. Each finished response is appended and
flushed to the operating system at once (a ``kill -9`` loses nothing already written) and
fsynced every ``sync_every`` entries or ``sync_seconds`` (a power cut loses at most that).
A torn last line from a killed writer is ignored on load. Failures are never cached, so a
re-run retries them.

The key is a hash of: model tag, sha256 of the clip's bytes, the prompt, and the item stem.
The stem is there because an endpoint may legitimately answer by item (the sham server does),
so two items whose clips happen to have identical bytes must not share an answer.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from pathlib import Path


def cache_key(model_tag: str, audio_sha256: str, prompt: str, item_stem: str) -> str:
    return hashlib.sha256(json.dumps([model_tag, audio_sha256, prompt, item_stem]).encode("utf-8")).hexdigest()


class JsonlStore:
    """Append-only key → value JSONL file: every ``put`` is appended and flushed at once, and
    fsynced every ``sync_every`` entries or ``sync_seconds``; lines that do not decode (a torn
    last line from a killed writer, foreign content) are skipped on load. ``encode`` turns a
    value into a JSON-able one and ``decode`` back (raising ValueError/TypeError/KeyError for
    an unusable one)."""

    def __init__(self, path: Path, fresh: bool = False, encode=lambda v: v, decode=lambda v: v,
                 sync_every: int = 64, sync_seconds: float = 1.0):
        self.path = Path(path)
        self.encode, self.decode = encode, decode
        self.entries: dict = {}
        if not fresh and self.path.exists():
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                        self.entries[rec["k"]] = decode(rec["v"])
                    except (ValueError, KeyError, TypeError):
                        continue
        self.loaded = len(self.entries)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self.sync_every, self.sync_seconds = sync_every, sync_seconds
        self.written = 0

    def get(self, key: str):
        return self.entries.get(key)

    def put(self, key: str, value) -> None:
        line = json.dumps({"k": key, "v": self.encode(value)}) + "\n"
        with self._lock:
            self.entries[key] = value
            self._fh.write(line)
            self._fh.flush()
            self.written += 1
            self._unsynced += 1
            now = time.monotonic()
            if self._unsynced >= self.sync_every or now - self._last_sync >= self.sync_seconds:
                os.fsync(self._fh.fileno())
                self._unsynced, self._last_sync = 0, now

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()


def _finite(value) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


class ResponseCache(JsonlStore):
    """Endpoint answers (finite floats), one file per model tag."""

    def __init__(self, cache_dir: Path, model_tag: str, fresh: bool = False,
                 sync_every: int = 64, sync_seconds: float = 1.0):
        self.model_tag = model_tag
        tag = hashlib.sha256(model_tag.encode("utf-8")).hexdigest()[:16]
        super().__init__(Path(cache_dir) / f"responses-{tag}.jsonl", fresh, decode=_finite,
                         sync_every=sync_every, sync_seconds=sync_seconds)
