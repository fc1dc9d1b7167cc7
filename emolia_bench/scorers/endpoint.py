"""Score rows through a remote similarity endpoint over HTTP (SPEC §4.3).

Design, in the order a request meets it:

* rows are ordered by clip, and the main thread reads each clip once: sha256 for the cache
  key and, unless ``--no-audio-send``, base64 for the payload. Finished requests are answered
  from the cache without touching the network.
* work goes through a bounded queue to ``workers`` threads, each with its own keep-alive
  connections (:class:`Transport`: http.client, ~0.1 ms of CPU per request); memory holds at most a
  few clips' payloads at a time. How many requests are in flight is adaptive
  (:class:`AdaptiveLimit`): it climbs from 8 while throughput rises and the server answers
  cleanly, halves when over a fifth of a window's requests meet overload (429, 502–504, timeouts,
  refused connections), and never exceeds ``workers``.
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
# The most requests in flight (--workers; the adaptive limit climbs to it while the server keeps up)
WORKERS = 64
# where the adaptive limit starts
ADAPTIVE_START = 8
# the largest response body read (an answer is a few dozen bytes)
MAX_RESPONSE_BYTES = 1 << 20


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


def environment_proxies(url: str) -> dict:
    """The proxies the environment sets for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
    by scheme), or none when ``NO_PROXY`` exempts its host — resolved once per replica, with the
    standard library's own reading of those variables."""
    import urllib.request

    host = urlparse(url).hostname or ""
    if urllib.request.proxy_bypass(host):
        return {}
    return urllib.request.getproxies()


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


class AdaptiveLimit:
    """How many requests may be in flight, found while the run goes (at most ``ceiling``).

    It starts at ``start`` and judges windows of finished requests (at least ``max(limit, 8)``
    of them and ``window_seconds``). A request ends ``ok`` (an answer; a 4xx too: the server is
    fine), ``overload`` (429, 502–504, a timeout, a refused or dropped connection: what a server
    that cannot keep up does) or ``other`` (a 500 or an unusable body: says nothing about load).
    At the end of a window, with ``share`` its overloads' share of its requests:

    * ``share`` above the tolerated level (20 % over the baseline, see below): the limit halves
      (multiplicative decrease; one step per window, however many failed in it);
    * ``share`` at most 10 % over the baseline and throughput up by 5 % on the last window: the
      limit grows by half (the server keeps up: try more);
    * otherwise it stays (the server is the bottleneck: more would only queue there).

    A halving is checked by the window after it: if the share did not fall (by 30 % or more),
    the failures do not come from load — a flaky server failing a fixed share of requests
    whatever the concurrency — so the halving is undone and that share becomes the baseline
    tolerated from then on (it drops again when the failures do). Without this check, scattered
    faults (bench/bench_faults.py's 50 % mix) would pin the limit at 1 and make a run take 20×
    longer for nothing. ``Retry-After`` is honoured by the request that got it (it waits that
    long before its retry, without holding a slot)."""

    def __init__(self, ceiling: int, start: int = 8, window_seconds: float = 0.2, clock=time.monotonic):
        self.clock = clock
        self.ceiling = max(1, ceiling)
        self.limit = min(self.ceiling, max(1, start))
        self.window_seconds = window_seconds
        self.in_flight = 0
        self.peak = self.limit
        self.baseline = 0.0  # the overload share that load does not explain
        self._cond = threading.Condition()
        self._window_start = clock()
        self._done = self._ok = self._overloaded = 0
        self._last_rate: float | None = None
        self._cut_from: tuple[int, float] | None = None  # (limit, share) before the last halving

    def acquire(self) -> None:
        with self._cond:
            while self.in_flight >= self.limit:
                self._cond.wait()
            self.in_flight += 1

    def release(self, outcome: str) -> None:
        """``outcome``: ``ok``, ``overload`` or ``other`` (see the class docstring)."""
        with self._cond:
            self.in_flight -= 1
            self._done += 1
            self._ok += outcome == "ok"
            self._overloaded += outcome == "overload"
            now = self.clock()
            elapsed = now - self._window_start
            if self._done >= max(self.limit, 8) and elapsed >= self.window_seconds:
                self._judge(self._overloaded / self._done, self._ok / elapsed)
                self._window_start, self._done, self._ok, self._overloaded = now, 0, 0, 0
            self._cond.notify_all()

    def _judge(self, share: float, rate: float) -> None:
        cut, self._cut_from = self._cut_from, None
        if cut is not None and share > 0.2 and share >= 0.7 * cut[1]:
            self.limit, self.baseline, self._last_rate = cut[0], share, None  # halving did not help: undo
            return
        if share < self.baseline / 2:
            self.baseline = share  # the failures have eased
        if share > self.baseline + 0.2:
            self._cut_from = (self.limit, share)
            self.limit = max(1, self.limit // 2)
            self._last_rate = None  # the rate after a cut is a new baseline
            return
        if share <= self.baseline + 0.1 and rate > 0 and (self._last_rate is None or rate >= 1.05 * self._last_rate):
            self.limit = min(self.ceiling, self.limit + max(1, self.limit // 2))
            self.peak = max(self.peak, self.limit)
        self._last_rate = rate


class Transport:
    """One worker thread's HTTP client: the standard library's ``http.client``, one keep-alive
    connection per replica.

    Why not requests or urllib3: their layers cost the client CPU on every request, and a
    client's CPU per request is what caps it at a fast server (measured in one thread against
    the sham server, process CPU per request: requests' ``Session.send`` 0.44–0.74 ms, urllib3's
    pool 0.19–0.27 ms, this 0.10–0.15 ms; bench/bench_benchmark.py prints the figure).

    * every socket is registered with the deadline watchdog under this thread, so cutting the
      thread's sockets ends its request (``--timeout`` bounds the whole request);
    * ``TCP_QUICKACK`` before each response is read: a server that writes its headers and its
      body in two writes with Nagle on (Python's http.server and many quick wrappers) otherwise
      waits ~40 ms for our delayed ACK of the first before it sends the second;
    * a kept-alive connection the server closed meanwhile is reopened once, at no retry's cost;
    * proxies from the environment (``HTTP(S)_PROXY``, ``NO_PROXY``): plain HTTP through the
      proxy, HTTPS through a CONNECT tunnel; credentials in the proxy URL are sent;
    * redirects are followed (up to 10), keeping the method and the body; https verifies
      certificates (the default SSL context)."""

    MAX_REDIRECTS = 10

    def __init__(self, urls: list[str], proxies: list[dict], deadlines: SocketDeadlines, timeout: float):
        import http.client
        import socket

        quickack = getattr(socket, "TCP_QUICKACK", None)
        key = threading.get_ident()

        class Watched:
            def connect(self):
                super().connect()
                deadlines.add_socket(key, self.sock)

            def getresponse(self):
                if quickack is not None and self.sock is not None:
                    try:
                        self.sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)
                    except OSError:
                        pass
                return super().getresponse()

        class WatchedHTTP(Watched, http.client.HTTPConnection):
            pass

        class WatchedHTTPS(Watched, http.client.HTTPSConnection):
            pass

        self.http, self.classes = http.client, {"http": WatchedHTTP, "https": WatchedHTTPS}
        self.timeout = timeout
        self.errors = (http.client.HTTPException, OSError)
        self.proxy_of = [proxy.get(urlparse(u).scheme) or proxy.get("all") for u, proxy in zip(urls, proxies, strict=True)]
        self.connections: dict[tuple, object] = {}

    def _connection(self, url: str, via: str | None):
        """The kept-alive connection for ``url``'s origin (through proxy ``via``) and the request
        target to send it."""
        u = urlparse(url)
        port = u.port or (443 if u.scheme == "https" else 80)
        target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        key = (u.scheme, u.hostname, port, via)
        conn = self.connections.get(key)
        headers = dict(JSON_HEADERS)
        if via:
            pu = urlparse(via if "://" in via else f"http://{via}")
            auth = {}
            if pu.username:
                token = base64.b64encode(f"{pu.username}:{pu.password or ''}".encode()).decode()
                auth = {"Proxy-Authorization": f"Basic {token}"}
            if u.scheme == "http":
                target = url  # absolute form, to the proxy
                headers.update(auth)
        if conn is None:
            cls = self.classes[u.scheme]
            if via:
                conn = cls(pu.hostname, pu.port or 80, timeout=self.timeout)
                if u.scheme == "https":
                    conn.set_tunnel(u.hostname, port, headers=auth)
            else:
                conn = cls(u.hostname, port, timeout=self.timeout)
            self.connections[key] = conn
        return conn, target, headers

    def _exchange(self, conn, target: str, headers: dict, body: bytes):
        reused = conn.sock is not None
        for attempt in (0, 1):
            try:
                conn.request("POST", target, body, headers)
                resp = conn.getresponse()
                # an answer is a few bytes; a server streaming more is not read into memory
                data = resp.read(MAX_RESPONSE_BYTES + 1)
                if len(data) > MAX_RESPONSE_BYTES:
                    conn.close()
                    raise UnusableAnswer(f"response body over {MAX_RESPONSE_BYTES // 1024} KiB")
            except (self.http.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                if reused and attempt == 0:  # the server closed an idle kept-alive connection
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            if resp.will_close or not resp.isclosed():  # (unread rest: the connection cannot be reused)
                conn.close()
            return resp.status, resp.headers, data

    def post(self, replica: int, url: str, body: bytes):
        """(status, headers, body bytes) of POSTing ``body`` to ``url``, after redirects."""
        from urllib.parse import urljoin

        via = self.proxy_of[replica]
        for _ in range(self.MAX_REDIRECTS + 1):
            conn, target, headers = self._connection(url, via)
            status, headers_in, data = self._exchange(conn, target, headers, body)
            location = headers_in.get("Location")
            if status in (301, 302, 303, 307, 308) and location:
                url = urljoin(url, location)
                try:
                    parsed = urlparse(url)
                    parsed.port  # noqa: B018 - raises ValueError for a port that is not a number
                    ok = parsed.scheme in self.classes and bool(parsed.hostname)
                except ValueError:  # a bad port, a malformed IPv6 host
                    ok = False
                if not ok:
                    raise UnusableAnswer(f"redirect to an unusable URL: {location[:100]!r}")
                continue
            return status, headers_in, data
        raise UnusableAnswer(f"more than {self.MAX_REDIRECTS} redirects")

    def reset(self) -> None:
        """Close every connection (after a request was cut: its socket is shut)."""
        for conn in self.connections.values():
            conn.close()

    close = reset


class UnusableAnswer(Exception):
    """The server answered, but with nothing usable: a redirect loop or to a non-HTTP URL, or a
    body too large to be an answer."""


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

    def __init__(self, endpoints: list[str], timeout: float = 60.0, workers: int = WORKERS, max_retries: int = MAX_RETRIES,
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
        self.limit: AdaptiveLimit | None = None  # the run's adaptive concurrency (its peak is reported)

    def _count(self, name: str, amount: float = 1) -> None:
        with self._stats_lock:
            self.stats[name] += amount

    def summary_line(self) -> str:
        st = self.stats
        rate = st["rows"] / st["seconds"] if st["seconds"] else 0.0
        peak = f"; up to {self.limit.peak} of {self.workers} in flight" if self.limit is not None else ""
        return (f"endpoint: {st['rows']} rows in {st['seconds']:.2f} s ({rate:,.0f} rows/s); {st['requests']} requests, "
                f"{st['retries']} retries, {st['cache_hits']} answered from the cache ({self.cache_path}){peak}")

    # -- one request ------------------------------------------------------------------------

    def _post(self, transport: Transport, limit: AdaptiveLimit, pool: ReplicaPool, task: Task,
              deadlines: SocketDeadlines) -> tuple[float | None, str | None]:
        last = "no attempt made"
        key = threading.get_ident()
        for attempt in range(self.max_retries + 1):
            if self._gave_up:
                return None, f"gave up: no successful answer for {self.give_up_after:g} s ({last})"
            limit.acquire()
            i = pool.acquire()
            wait, outcome = None, "overload"
            deadlines.arm(key, self.timeout)
            self._count("requests")
            try:
                status, headers, data = transport.post(i, self.urls[i], task.body)
            except UnusableAnswer as e:
                deadlines.disarm(key)
                pool.release(i, ok=True)
                limit.release("other")
                return None, f"bad response: {e}"
            except transport.errors as e:
                cut = deadlines.disarm(key)
                pool.release(i, ok=False)
                limit.release("overload")
                if cut or isinstance(e, TimeoutError):
                    last = f"timeout: no full answer within {self.timeout:g} s"
                else:
                    last = f"connection error: {type(e).__name__}"
            else:
                cut = deadlines.disarm(key)
                if cut:
                    transport.reset()  # its socket was shut down
                    last = f"timeout: no full answer within {self.timeout:g} s"
                elif status == 429 or status >= 500:
                    last = f"HTTP {status}"
                    wait = retry_after_seconds(headers.get("Retry-After"))
                    outcome = "overload" if status in (429, 502, 503, 504) else "other"
                elif status >= 400:
                    pool.release(i, ok=True)  # the replica is healthy; the request is wrong
                    limit.release("ok")
                    self._succeeded()
                    return None, f"HTTP {status}: {_error_text(data, headers)}"
                else:
                    try:
                        value = parse_similarity(json.loads(data))
                    except (ValueError, BadResponse) as e:
                        last = f"bad response: {e if isinstance(e, BadResponse) else 'body is not JSON'}"
                        outcome = "other"
                    else:
                        pool.release(i, ok=True)
                        limit.release("ok")
                        self._succeeded()
                        return value, None
                pool.release(i, ok=False)
                limit.release(outcome)
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

        self.proxies = [environment_proxies(u) for u in self.urls]
        limit = AdaptiveLimit(self.workers, start=min(self.workers, ADAPTIVE_START))
        self.limit = limit

        def worker() -> None:
            transport = Transport(self.urls, self.proxies, deadlines, self.timeout)
            try:
                while (task := tasks.get()) is not None:
                    value, error = self._post(transport, limit, pool, task, deadlines)
                    if error is None:
                        cache.put(task.key, value)
                    done(task.row, value, error)
            finally:
                transport.close()

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


def _error_text(body: bytes, headers) -> str:
    """The server's ``{"error": …}``, else the start of its body."""
    try:
        data = json.loads(body)
        if isinstance(data, dict) and "error" in data:
            return str(data["error"])[:200]
    except ValueError:
        pass
    return body[:200].decode("utf-8", "replace").strip() or "(empty body)"
