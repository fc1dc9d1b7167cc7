"""Score rows through a remote similarity endpoint over HTTP (the contract: README, "The endpoint
contract").

In the order a request meets it:

* rows are ordered by clip, and each clip is read once: sha256 for the cache key and, unless
  ``--no-audio-send``, base64 for the payload. Rows the cache answers never touch the network.
* requests go out concurrently on aiohttp (one event loop, one connection pool per replica), at
  most ``workers`` in flight; a row waiting out a back-off holds no request slot, and at most
  :data:`ROWS_PER_SLOT` × ``workers`` rows' payloads are held in memory.
* each request goes to the replica with the fewest requests in flight; a replica that fails
  several times in a row sits out a cool-down (:class:`ReplicaPool`).
* ``timeout`` is aiohttp's *total* timeout: a deadline for the whole request (connect, send,
  every byte of the answer), however slowly a server drips.
* timeouts, connection errors, 5xx, 429 and unusable bodies are retried, up to ``max_retries``
  times per request, after exponential back-off with full jitter or the server's
  ``Retry-After``, whichever is longer; a 4xx other than 429 is the request's fault and is not
  retried. The run gives up only when no request has succeeded for ``give_up_after`` seconds (a
  dead server): every row still waiting then fails with its last cause, at once or when its
  attempt in flight ends (within ``timeout``).
* proxies come from the environment (``HTTP(S)_PROXY``, ``NO_PROXY``), through aiohttp's
  ``trust_env``; redirects are followed (aiohttp's rules, at most 10).
* every success is appended to the on-disk cache as it arrives, so a killed run resumes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import os
import random
import time
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from ..cache import ResponseCache, cache_key
from ..defaults import (
    ENDPOINT_GIVE_UP_AFTER,
    ENDPOINT_MAX_RETRIES,
    ENDPOINT_TIMEOUT,
    ENDPOINT_WORKERS,
)
from ..io import InputError
from ..paths import ClipRefused, read_clip
from . import Scorer, ScoreResult

RESPONSE_KEYS = ("similarity", "score", "logit")
JSON_HEADERS = {"Content-Type": "application/json"}
# the largest response body read (an answer is a few dozen bytes)
MAX_RESPONSE_BYTES = 1 << 20
# back-off before retry k (0-based): uniform in [0, min(BACKOFF_CAP, BACKOFF_BASE * 2**k)] seconds,
# so a burst of failures spreads out instead of returning in step
BACKOFF_BASE, BACKOFF_CAP = 0.25, 10.0
# the longest a Retry-After is honoured (a server asking for hours is treated as failing)
MAX_RETRY_AFTER = 60.0
# rows open at once per request slot: a row waiting out its back-off or a Retry-After holds no
# request slot, so other rows use it meanwhile; memory holds at most this many rows' payloads
ROWS_PER_SLOT = 8


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
    """Least-outstanding-requests choice over replicas, with a cool-down for failing ones: after
    ``fail_threshold`` failures in a row a replica sits out ``cooldown`` seconds, doubling up to
    ``max_cooldown`` while it keeps failing (only with more than one replica)."""

    def __init__(self, urls: list[str], fail_threshold: int = 3, cooldown: float = 5.0, max_cooldown: float = 60.0):
        self.urls = urls
        self.outstanding = [0] * len(urls)
        self.failures = [0] * len(urls)
        self.cool_until = [0.0] * len(urls)
        self.cooldowns = [cooldown] * len(urls)
        self.base_cooldown, self.max_cooldown, self.fail_threshold = cooldown, max_cooldown, fail_threshold
        self.sent = [0] * len(urls)

    def acquire(self) -> int:
        now = time.monotonic()
        live = [i for i in range(len(self.urls)) if self.cool_until[i] <= now]
        # all cooling down: use the one that comes back first rather than stall
        pool = live or [min(range(len(self.urls)), key=lambda i: self.cool_until[i])]
        i = min(pool, key=lambda j: (self.outstanding[j], self.sent[j], j))
        self.outstanding[i] += 1
        self.sent[i] += 1
        return i

    def release(self, i: int, ok: bool) -> None:
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


class UnusableAnswer(Exception):
    """The server answered, but with nothing usable: a redirect loop or to a non-HTTP URL, or a
    body too large to be an answer. Not retried."""


class Retryable(Exception):
    """An attempt that may succeed if repeated; ``wait``: the server's Retry-After, if any."""

    def __init__(self, cause: str, wait: float | None = None):
        super().__init__(cause)
        self.wait = wait


def payload_body(text: str, audio_path: str, item_stem: str, b64: bytes | None) -> bytes:
    """The request JSON of the endpoint contract. The base64 bytes need no escaping, so they are
    spliced in as bytes rather than run through the JSON encoder (they are ~99 % of the payload)."""
    head = json.dumps({"text": text, "audio_filename": audio_path.rsplit("/", 1)[-1],
                       "audio_path": audio_path, "item_stem": item_stem}).encode("utf-8")
    if b64 is None:
        return head
    return b"".join((head[:-1], b', "audio_base64": "', b64, b'"}'))


async def _read_limited(resp) -> bytes:
    """The response body, refused beyond :data:`MAX_RESPONSE_BYTES` (read no further)."""
    if resp.content_length is not None and resp.content_length <= MAX_RESPONSE_BYTES:
        return await resp.read()  # the usual answer: a few dozen bytes, announced
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise UnusableAnswer(f"response body over {MAX_RESPONSE_BYTES // 1024} KiB")
        chunks.append(chunk)
    return b"".join(chunks)


class EndpointScorer(Scorer):
    mode = "remote"

    def __init__(self, endpoints: list[str], timeout: float = ENDPOINT_TIMEOUT, workers: int = ENDPOINT_WORKERS,
                 max_retries: int = ENDPOINT_MAX_RETRIES, cache_dir: Path | None = None, fresh: bool = False,
                 model_tag: str | None = None, send_audio: bool = True,
                 give_up_after: float = ENDPOINT_GIVE_UP_AFTER):
        if not endpoints:
            raise ValueError("at least one endpoint URL is needed")
        self.urls = [check_endpoint_url(u) for u in endpoints]
        self.endpoint = self.urls[0] if len(self.urls) == 1 else self.urls
        self.model_tag = model_tag or self.urls[0]
        self.timeout, self.workers, self.max_retries = timeout, max(1, workers), max(0, max_retries)
        self.cache_dir, self.fresh, self.send_audio = cache_dir, fresh, send_audio
        self.give_up_after = give_up_after
        self.gave_up = False  # set for the rest of the run once no request succeeded for give_up_after
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0, "seconds": 0.0, "rows": 0}
        self.cache_path: Path | None = None
        self.replica_requests: dict[str, int] = {}

    def summary_line(self) -> str:
        st = self.stats
        rate = st["rows"] / st["seconds"] if st["seconds"] else 0.0
        return (f"endpoint: {st['rows']} rows in {st['seconds']:.2f} s ({rate:,.0f} rows/s); {st['requests']} requests, "
                f"{st['retries']} retries, {st['cache_hits']} answered from the cache ({self.cache_path})")

    # -- one request ------------------------------------------------------------------------

    async def _attempt(self, session, url: str, body: bytes) -> float:
        """One POST: the similarity, or :class:`Retryable` / :class:`UnusableAnswer` / a final
        ``ValueError`` (a 4xx) saying why not."""
        import aiohttp

        self.stats["requests"] += 1
        try:
            async with session.post(url, data=body) as resp:
                data = await _read_limited(resp)
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except (aiohttp.TooManyRedirects, aiohttp.InvalidUrlRedirectClientError,
                aiohttp.NonHttpUrlRedirectClientError) as e:
            raise UnusableAnswer(f"redirect to an unusable URL: {str(e)[:100]!r}") from None
        except TimeoutError:
            raise Retryable(f"timeout: no full answer within {self.timeout:g} s") from None
        except aiohttp.ClientError as e:
            raise Retryable(f"connection error: {type(e).__name__}") from None
        if status == 429 or status >= 500:
            raise Retryable(f"HTTP {status}", retry_after_seconds(retry_after))
        if status >= 400:
            raise ValueError(f"HTTP {status}: {_error_text(data)}")
        try:
            return parse_similarity(json.loads(data))
        except ValueError:
            raise Retryable("bad response: body is not JSON") from None
        except BadResponse as e:
            raise Retryable(f"bad response: {e}") from None

    async def _post(self, sessions, targets, pool: ReplicaPool, in_flight: asyncio.Semaphore,
                    body: bytes) -> tuple[float | None, str | None]:
        """The similarity of one request, retried as the module docstring says, or its error."""
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if self._gave_up.is_set():
                return None, f"gave up: no successful answer for {self.give_up_after:g} s ({last})"
            i = pool.acquire()
            try:
                async with in_flight:
                    if self._gave_up.is_set():  # it gave up while this row waited for a slot
                        pool.release(i, ok=True)
                        return None, f"gave up: no successful answer for {self.give_up_after:g} s ({last})"
                    value = await self._attempt(sessions[i], targets[i], body)
            except UnusableAnswer as e:
                pool.release(i, ok=True)
                return None, f"bad response: {e}"
            except ValueError as e:  # a 4xx: the replica is healthy, the request is wrong
                pool.release(i, ok=True)
                self._last_success = time.monotonic()
                return None, str(e)
            except Retryable as e:
                pool.release(i, ok=False)
                last, wait = str(e), e.wait
            else:
                pool.release(i, ok=True)
                self._last_success = time.monotonic()
                return value, None
            if attempt == self.max_retries:
                break
            self.stats["retries"] += 1
            backoff = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
            try:  # the back-off, cut short if the run gives up meanwhile
                await asyncio.wait_for(self._gave_up.wait(), min(max(backoff, wait or 0.0), MAX_RETRY_AFTER))
            except TimeoutError:
                pass
        attempts = attempt + 1
        return None, f"{last} after {attempts} attempt{'s' if attempts > 1 else ''}"

    # -- the run ----------------------------------------------------------------------------

    def score(self, rows: pd.DataFrame, dataset_root: Path, progress=None) -> ScoreResult:
        started = time.perf_counter()
        try:
            return asyncio.run(self._score(rows, dataset_root, progress))
        finally:
            self.stats["seconds"] += time.perf_counter() - started
            self.stats["rows"] += len(rows)

    async def _score(self, rows: pd.DataFrame, dataset_root: Path, progress) -> ScoreResult:
        import aiohttp

        n = len(rows)
        sims = np.full(n, np.nan)
        errors: list[str | None] = [None] * n
        n_errors = 0
        cache = ResponseCache(self.cache_dir or Path(".cache/emolia-bench"), self.model_tag, fresh=self.fresh)
        self.cache_path = cache.path
        pool = ReplicaPool(self.urls)
        self._last_success, self._gave_up = time.monotonic(), asyncio.Event()
        if self.gave_up:  # an earlier subset of this run found the endpoint dead: cached rows only
            self._gave_up.set()

        async def watch() -> None:  # give up once nothing has succeeded for give_up_after
            while time.monotonic() - self._last_success <= self.give_up_after:
                await asyncio.sleep(min(1.0, self.give_up_after / 10))
            self._gave_up.set()
            self.gave_up = True

        def done(row: int, value: float | None, error: str | None) -> None:
            nonlocal n_errors
            if error is None:
                sims[row] = value
            else:
                errors[row] = error
            if progress is not None:
                if error is not None:
                    n_errors += 1
                    progress.set_postfix(errors=n_errors, refresh=False)
                progress.update(1)

        in_flight, open_rows = asyncio.Semaphore(self.workers), asyncio.Semaphore(ROWS_PER_SLOT * self.workers)

        async def request(row: int, key: str, body: bytes) -> None:
            try:
                value, error = await self._post(sessions, targets, pool, in_flight, body)
                if error is None:
                    cache.put(key, value)
                done(row, value, error)
            finally:
                open_rows.release()

        import yarl

        targets = [yarl.URL(u) for u in self.urls]  # parsed once, not per request
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.workers), timeout=timeout,
                                          headers=JSON_HEADERS, trust_env=True, auto_decompress=False,
                                          cookie_jar=aiohttp.DummyCookieJar())  # stateless: no cookies kept
                    for _ in self.urls]
        tasks, watcher = set(), asyncio.create_task(watch())
        try:
            root = os.fspath(dataset_root)
            paths = rows["audio_path"].tolist()
            prompts, stems = rows["prompt"].tolist(), rows["item_stem"].tolist()
            current_path, sha, b64, read_error = None, None, None, None
            for row in np.argsort(np.asarray(paths, dtype=str), kind="stable").tolist():
                if paths[row] != current_path:
                    current_path = paths[row]
                    try:
                        data = read_clip(root, current_path)
                    except ClipRefused as e:
                        sha, read_error = None, str(e)
                    else:
                        sha = hashlib.sha256(data).hexdigest()
                        b64 = base64.b64encode(data) if self.send_audio else None
                if sha is None:
                    done(row, None, read_error)
                    continue
                key = cache_key(self.model_tag, sha, prompts[row], stems[row])
                hit = cache.get(key)
                if hit is not None:
                    self.stats["cache_hits"] += 1
                    done(row, hit, None)
                    continue
                await open_rows.acquire()  # bounds the payloads held in memory
                task = asyncio.create_task(request(row, key, payload_body(prompts[row], current_path, stems[row], b64)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            watcher.cancel()
            for task in tasks:
                task.cancel()
            for session in sessions:
                await session.close()
            cache.close()
        self.replica_requests = dict(zip(self.urls, pool.sent, strict=True))
        return ScoreResult(similarity=sims, error=errors)


def _error_text(body: bytes) -> str:
    """The server's ``{"error": …}``, else the start of its body."""
    try:
        data = json.loads(body)
        if isinstance(data, dict) and "error" in data:
            return str(data["error"])[:200]
    except ValueError:
        pass
    return body[:200].decode("utf-8", "replace").strip() or "(empty body)"
