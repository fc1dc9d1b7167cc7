"""An append-only on-disk cache of endpoint responses, so an interrupted run resumes.

One JSONL file per model tag under the cache folder. Each finished response is appended and
flushed to the operating system at once (a ``kill -9`` loses nothing already written) and
fsynced every ``sync_every`` entries or ``sync_seconds`` (a power cut loses at most that).
A torn last line from a killed writer is ignored on load and ended before the next append.
One process at a time: a store is locked while open (``<file>.lock``). Failures are never
cached, so a re-run retries them.

The key is a hash of: model tag, sha256 of the clip's bytes, the prompt, and the item stem.
The stem is there because an endpoint may legitimately answer by item (the sham server does),
so two items whose clips happen to have identical bytes must not share an answer.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
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
        self._lock_fh = lock_exclusively(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")
        if self._fh.tell() and not _ends_with_newline(self.path):
            # a killed writer left a torn last line: end it, so the next answer starts a line of
            # its own instead of being glued to the fragment (and lost on the next load)
            self._fh.write("\n")
        self._lock = threading.Lock()
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self.sync_every, self.sync_seconds = sync_every, sync_seconds
        self.written = 0
        self.failed: OSError | None = None  # the write error that stopped appending, if any

    def get(self, key: str):
        return self.entries.get(key)

    def put(self, key: str, value) -> None:
        """Keep ``value`` and append it to the file. A file that cannot be written (a full disk,
        a quota) stops the appending, not the run: one line on stderr says so, the values stay
        in memory for this run, and a later run asks again for what was not saved."""
        line = json.dumps({"k": key, "v": self.encode(value)}) + "\n"
        with self._lock:
            self.entries[key] = value
            if self.failed is not None:
                return
            try:
                self._fh.write(line)
                self._fh.flush()
                self.written += 1
                self._unsynced += 1
                now = time.monotonic()
                if self._unsynced >= self.sync_every or now - self._last_sync >= self.sync_seconds:
                    os.fsync(self._fh.fileno())
                    self._unsynced, self._last_sync = 0, now
            except OSError as e:
                self.failed = e
                print(f"{self.path}: cannot be written ({e.strerror or e}); the run goes on without saving "
                      "answers there, and a re-run will ask for them again", file=sys.stderr)

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                try:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                except OSError as e:  # already said in put(), or said now
                    if self.failed is None:
                        print(f"{self.path}: cannot be written ({e.strerror or e}); its last answers were not "
                              "saved", file=sys.stderr)
                    self.failed = e
                finally:
                    try:
                        self._fh.close()
                    except OSError:  # the buffered tail cannot be written either: nothing more to say
                        pass
            if self._lock_fh is not None and not self._lock_fh.closed:
                self._lock_fh.close()  # releases the lock


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def lock_exclusively(path: Path):
    """Take the exclusive advisory lock of the store at ``path`` (``<path>.lock``, holding the
    holder's pid) for as long as the returned file stays open; a second run on the same store is
    bad input naming the holder — two runs on one cache would request the same rows twice and
    interleave their appends."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no advisory locks
        return None
    from .errors import InputError

    lock_path = Path(f"{path}.lock")
    fh = open(lock_path, "a+", encoding="utf-8")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "unknown"
        fh.close()
        raise InputError(path, f"is in use by another running process (pid {holder}); two runs on one cache would "
                               "request the same rows: wait for it to finish, or give this run another --cache-dir") from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


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
