"""Score rows through a remote similarity endpoint over HTTP (SPEC §4.3).

Design, in the order a request meets it:

* rows are ordered by clip, and the main thread reads each clip once: sha256 for the cache
  key and, unless ``--no-audio-send``, base64 for the payload. Finished requests are answered
  from the cache without touching the network.
* work goes through a bounded queue to a fixed pool of worker threads, each with its own
  keep-alive ``requests.Session``; memory holds at most a few clips' payloads at a time.
* each request goes to the replica with the fewest requests in flight; a replica that fails
  several times in a row is taken out of rotation for a cool-down.
* timeouts, connection errors, 5xx, 429 (honouring ``Retry-After``) and unparseable bodies
  are retried with exponential back-off and full jitter, up to ``max_retries`` per request,
  for as long as the endpoint keeps answering: the run gives up only when no request has
  succeeded for ``give_up_after`` seconds (a dead server), and then every row still waiting
  fails at once. A row that fails is returned with its error, never dropped.
* ``timeout`` is a deadline for the whole request (:class:`deadlines.SocketDeadlines`), not for each read.
* every success is appended to the on-disk cache as it arrives.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import queue
import random
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from ..cache import ResponseCache, cache_key
from ..deadlines import SocketDeadlines
from ..io import InputError
from ..paths import ClipRefused, read_clip
from . import Scorer, ScoreResult

RESPONSE_KEYS = ("similarity", "score", "logit")
# Retries per request: at a 50 % fault rate a row fails all 17 attempts with probability
# 0.5**17 ≈ 7.6e-6 (0.06 rows expected among 8,000), at 20 % with 1.3e-12; a dead endpoint is
# caught by GIVE_UP_AFTER, not by this count.
MAX_RETRIES = 16
# Seconds without a single successful answer after which the run gives up on the endpoint.
GIVE_UP_AFTER = 120.0
JSON_HEADERS = {"Content-Type": "application/json"}


class BadResponse(Exception):
    """The server answered, but not with a usable similarity."""


def parse_similarity(data) -> float:
    """The first of similarity / score / logit in a JSON object, as a finite float."""
    if not isinstance(data, dict):
        raise BadResponse(f"expected a JSON object, got {type(data).__name__}")
    for key in RESPONSE_KEYS:
        if key in data:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BadResponse(f"'{key}' is {type(value).__name__}, expected a number")
            if not math.isfinite(value):
                raise BadResponse(f"'{key}' is not finite ({value})")
            return float(value)
    raise BadResponse("no 'similarity', 'score' or 'logit' in the response")


def retry_after_seconds(header: str | None) -> float | None:
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(header).timestamp() - time.time())
        except (TypeError, ValueError, IndexError):
            return None


def check_endpoint_url(url: str) -> str:
    p = urlparse(url)
    if p.scheme not in ("http", "https") or not p.netloc:
        raise InputError("--endpoint", f"{url!r} is not an http(s) URL; expected e.g. http://127.0.0.1:8765/v1/similarity")
    return url


class ReplicaPool:
    """Least-outstanding-requests choice over replicas, with a cool-down for failing ones."""

    def __init__(self, urls: list[str], fail_threshold: int = 3, cooldown: float = 5.0, max_cooldown: float = 60.0):
        self.urls = urls
        self.outstanding = [0] * len(urls)
        self.failures = [0] * len(urls)
        self.cool_until = [0.0] * len(urls)
        self.cooldowns = [cooldown] * len(urls)
        self.base_cooldown, self.max_cooldown, self.fail_threshold = cooldown, max_cooldown, fail_threshold
        self.sent = [0] * len(urls)
        self._lock = threading.Lock()

    def acquire(self) -> int:
        with self._lock:
            now = time.monotonic()
            live = [i for i in range(len(self.urls)) if self.cool_until[i] <= now]
            # all cooling down: use the one that comes back first rather than stall
            pool = live or [min(range(len(self.urls)), key=lambda i: self.cool_until[i])]
            i = min(pool, key=lambda j: (self.outstanding[j], self.sent[j], j))
            self.outstanding[i] += 1
            self.sent[i] += 1
            return i

    def release(self, i: int, ok: bool) -> None:
        with self._lock:
            self.outstanding[i] -= 1
            if ok:
                self.failures[i] = 0
                self.cooldowns[i] = self.base_cooldown
                return
            self.failures[i] += 1
            if self.failures[i] >= self.fail_threshold and len(self.urls) > 1:
                self.cool_until[i] = time.monotonic() + self.cooldowns[i]
                self.cooldowns[i] = min(self.cooldowns[i] * 2, self.max_cooldown)
                self.failures[i] = 0


def watched_adapter(deadlines: SocketDeadlines, n_replicas: int):
    """A requests adapter whose connections register their sockets with ``deadlines`` under the
    thread that opens them: each worker thread has its own session, so a thread's sockets are
    the ones its request in flight may be using, and cutting them ends that request."""
    import requests
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    class Watched:
        def connect(self):
            super().connect()
            deadlines.add_socket(threading.get_ident(), self.sock)

    class WatchedHTTP(Watched, HTTPConnection):
        pass

    class WatchedHTTPS(Watched, HTTPSConnection):
        pass

    class PoolHTTP(HTTPConnectionPool):
        ConnectionCls = WatchedHTTP

    class PoolHTTPS(HTTPSConnectionPool):
        ConnectionCls = WatchedHTTPS

    adapter = requests.adapters.HTTPAdapter(pool_connections=n_replicas, pool_maxsize=n_replicas, max_retries=0)
    adapter.poolmanager.pool_classes_by_scheme = {"http": PoolHTTP, "https": PoolHTTPS}
    return adapter


@dataclass
class Task:
    row: int
    key: str
    body: bytes  # the JSON payload, serialised once


def payload_body(text: str, audio_path: str, item_stem: str, b64: bytes | None) -> bytes:
    """The request JSON of SPEC §4.3. The base64 bytes need no escaping, so they are spliced in
    as bytes rather than run through the JSON encoder (they are ~99 % of the payload, and every
    copy of them costs the client time under the GIL)."""
    head = json.dumps({"text": text, "audio_filename": audio_path.rsplit("/", 1)[-1],
                       "audio_path": audio_path, "item_stem": item_stem}).encode("utf-8")
    if b64 is None:
        return head
    return b"".join((head[:-1], b', "audio_base64": "', b64, b'"}'))


class EndpointScorer(Scorer):
    mode = "remote"

    def __init__(self, endpoints: list[str], timeout: float = 60.0, workers: int = 16, max_retries: int = MAX_RETRIES,
                 cache_dir: Path | None = None, fresh: bool = False, model_tag: str | None = None,
                 send_audio: bool = True, backoff_base: float = 0.25, backoff_cap: float = 10.0,
                 give_up_after: float = GIVE_UP_AFTER):
        if not endpoints:
            raise ValueError("at least one endpoint URL is needed")
        self.urls = [check_endpoint_url(u) for u in endpoints]
        self.endpoint = self.urls[0] if len(self.urls) == 1 else self.urls
        self.model_tag = model_tag or self.urls[0]
        self.timeout, self.workers, self.max_retries = timeout, max(1, workers), max(0, max_retries)
        self.cache_dir, self.fresh, self.send_audio = cache_dir, fresh, send_audio
        self.backoff_base, self.backoff_cap, self.give_up_after = backoff_base, backoff_cap, give_up_after
        # progress: when a request last succeeded, and whether the run has given up on the endpoint
        self._last_success = time.monotonic()
        self._gave_up = False
        # counters of the work done, updated by the worker threads under the lock
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0, "seconds": 0.0, "rows": 0}
        self._stats_lock = threading.Lock()
        # set when a run starts: the cache file, each replica's proxies (read from the
        # environment once), and how many requests each replica was sent
        self.cache_path: Path | None = None
        self.proxies: list[dict] = []
        self.replica_requests: dict[str, int] = {}

    def _count(self, name: str, amount: float = 1) -> None:
        with self._stats_lock:
            self.stats[name] += amount

    def summary_line(self) -> str:
        st = self.stats
        rate = st["rows"] / st["seconds"] if st["seconds"] else 0.0
        return (f"endpoint: {st['rows']} rows in {st['seconds']:.2f} s ({rate:,.0f} rows/s); {st['requests']} requests, "
                f"{st['retries']} retries, {st['cache_hits']} answered from the cache ({self.cache_path})")

    # -- one request ------------------------------------------------------------------------

    def _post(self, session, templates, pool: ReplicaPool, task: Task, deadlines: SocketDeadlines) -> tuple[float | None, str | None]:
        import requests

        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if self._gave_up:
                return None, f"gave up: no successful answer for {self.give_up_after:g} s ({last})"
            i = pool.acquire()
            wait = None
            deadlines.arm(threading.get_ident(), self.timeout)
            try:
                request = templates[i].copy()
                request.body = task.body
                request.headers["Content-Length"] = str(len(task.body))
                resp = session.send(request, timeout=self.timeout, proxies=self.proxies[i])
                cut = deadlines.disarm(threading.get_ident())
                self._count("requests")
                if cut:
                    pool.release(i, ok=False)
                    last = f"timeout: no full answer within {self.timeout:g} s"
                elif resp.status_code == 429 or resp.status_code >= 500:
                    last = f"HTTP {resp.status_code}"
                    wait = retry_after_seconds(resp.headers.get("Retry-After"))
                    pool.release(i, ok=False)
                elif resp.status_code >= 400:
                    pool.release(i, ok=True)  # the replica is healthy; the request is wrong
                    self._succeeded()
                    return None, f"HTTP {resp.status_code}: {_error_text(resp)}"
                else:
                    try:
                        value = parse_similarity(resp.json())
                    except (ValueError, BadResponse) as e:
                        pool.release(i, ok=False)
                        last = f"bad response: {e if isinstance(e, BadResponse) else 'body is not JSON'}"
                    else:
                        pool.release(i, ok=True)
                        self._succeeded()
                        return value, None
            except requests.RequestException as e:
                cut = deadlines.disarm(threading.get_ident())
                pool.release(i, ok=False)
                if cut or isinstance(e, requests.Timeout):
                    last = f"timeout: no full answer within {self.timeout:g} s"
                else:
                    last = f"connection error: {type(e).__name__}"
            if attempt == self.max_retries:
                break
            if time.monotonic() - self._last_success > self.give_up_after:
                self._gave_up = True
                return None, f"gave up: no successful answer for {self.give_up_after:g} s ({last})"
            self._count("retries")
            backoff = random.uniform(0, min(self.backoff_cap, self.backoff_base * 2**attempt))
            time.sleep(min(max(backoff, wait or 0.0), 60.0))
        attempts = attempt + 1
        return None, f"{last} after {attempts} attempt{'s' if attempts > 1 else ''}"

    def _succeeded(self) -> None:
        self._last_success = time.monotonic()  # a float store: atomic under the GIL

    # -- the run ----------------------------------------------------------------------------

    def score(self, rows: pd.DataFrame, dataset_root: Path, progress=None) -> ScoreResult:
        import requests

        n = len(rows)
        sims = np.full(n, np.nan)
        errors: list[str | None] = [None] * n
        cache = ResponseCache(self.cache_dir or Path(".cache/emolia-bench"), self.model_tag, fresh=self.fresh)
        self.cache_path = cache.path
        pool = ReplicaPool(self.urls)
        progress_lock = threading.Lock()
        deadlines = SocketDeadlines(name="endpoint-deadlines")
        self._last_success, self._gave_up = time.monotonic(), False
        tasks: queue.Queue = queue.Queue(maxsize=self.workers * 2)
        n_errors = [0]

        def done(row: int, value: float | None, error: str | None) -> None:
            if error is None:
                sims[row] = value
            else:
                errors[row] = error
            if progress is not None:
                with progress_lock:
                    if error is not None:
                        n_errors[0] += 1
                        progress.set_postfix(errors=n_errors[0], refresh=False)
                    progress.update(1)

        # Proxy settings from the environment are resolved once per replica here; sessions then
        # skip re-reading the environment on every request (a third of requests' own overhead).
        self.proxies = [requests.utils.get_environ_proxies(u) for u in self.urls]

        def worker() -> None:
            with requests.Session() as session:
                session.trust_env = False
                adapter = watched_adapter(deadlines, len(self.urls))
                session.mount("http://", adapter)
                session.mount("https://", adapter)
                templates = [session.prepare_request(requests.Request("POST", u, headers=JSON_HEADERS, data=b""))
                             for u in self.urls]
                while (task := tasks.get()) is not None:
                    value, error = self._post(session, templates, pool, task, deadlines)
                    if error is None:
                        cache.put(task.key, value)
                    done(task.row, value, error)

        started = time.perf_counter()
        threads = [threading.Thread(target=worker, daemon=True, name=f"endpoint-{k}") for k in range(self.workers)]
        for t in threads:
            t.start()
        try:
            root = os.fspath(dataset_root)
            paths = rows["audio_path"].tolist()
            prompts, stems = rows["prompt"].tolist(), rows["item_stem"].tolist()
            positions = np.argsort(np.asarray(paths, dtype=str), kind="stable")
            current_path, sha, b64, read_error = None, None, None, None
            for row in positions.tolist():
                if paths[row] != current_path:
                    current_path = paths[row]
                    try:
                        data = read_clip(root, current_path)
                    except ClipRefused as e:
                        sha = None
                        read_error = str(e)
                    else:
                        sha = hashlib.sha256(data).hexdigest()
                        b64 = base64.b64encode(data) if self.send_audio else None
                if sha is None:
                    done(row, None, read_error)
                    continue
                key = cache_key(self.model_tag, sha, prompts[row], stems[row])
                hit = cache.get(key)
                if hit is not None:
                    self._count("cache_hits")
                    done(row, hit, None)
                    continue
                body = payload_body(prompts[row], current_path, stems[row], b64)
                tasks.put(Task(row, key, body))  # blocks while the workers are busy
        finally:
            for _ in threads:
                tasks.put(None)
            for t in threads:
                t.join()
            cache.close()
            deadlines.close()
            self._count("seconds", time.perf_counter() - started)
            self._count("rows", n)
        self.replica_requests = dict(zip(self.urls, pool.sent, strict=True))
        return ScoreResult(similarity=sims, error=errors)


def _error_text(resp) -> str:
    try:
        data = resp.json()
        if isinstance(data, dict) and "error" in data:
            return str(data["error"])[:200]
    except ValueError:
        pass
    return (resp.reason or "")[:200]
