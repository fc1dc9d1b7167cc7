"""The endpoint client's own parts, in-process: the adaptive concurrency limit (on a fake
clock, and against a server that allows four requests at a time), an HTTP proxy from the
environment, and hostile answers. Servers bind 127.0.0.1 on free ports and stop here."""

import json

import pytest


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def finish(limit, n: int, seconds: float, clock: Clock, outcome: str = "ok") -> None:
    """``n`` requests through ``limit``, completing evenly over ``seconds`` of the fake clock."""
    for _ in range(n):
        limit.acquire()
        clock.now += seconds / n
        limit.release(outcome)


def test_adaptive_limit_climbs_while_throughput_rises_holds_at_a_plateau_and_halves_on_overload():
    from emolia_bench.scorers.endpoint import AdaptiveLimit

    clock = Clock()
    limit = AdaptiveLimit(ceiling=64, start=8, window_seconds=0.2, clock=clock)
    # a window of 8 in 0.25 s (32/s): the first window has nothing to beat -> 8 + 4 = 12
    finish(limit, 8, 0.25, clock)
    assert limit.limit == 12
    # 12 in 0.25 s (48/s, +50 %) -> 18; then 18 in 0.25 s (72/s) -> 27
    finish(limit, 12, 0.25, clock)
    finish(limit, 18, 0.25, clock)
    assert limit.limit == 27
    # the server saturates: 27 in 0.375 s is 72/s again, no 5 % gain -> held at 27
    finish(limit, 27, 0.375, clock)
    assert limit.limit == 27
    # a window with one overload in 27 (4 %) and a 5 % gain still grows: scattered faults do not pin it
    finish(limit, 26, 0.26, clock)
    finish(limit, 1, 0.01, clock, outcome="overload")
    assert limit.limit == 40
    # a window where over a fifth meet overload halves, once, however many failed
    finish(limit, 30, 0.3, clock)
    finish(limit, 10, 0.1, clock, outcome="overload")
    assert limit.limit == 20
    # ... and the halving helped (no overloads after it): it is not undone, and with the rate
    # baseline reset this clean window grows it again, by half
    finish(limit, 20, 0.4, clock)
    assert limit.limit == 30 and limit.baseline == 0
    # a 500 or a bad body says nothing about load: a window of them neither grows nor halves
    finish(limit, 30, 0.4, clock, outcome="other")
    assert limit.limit == 30
    # it never passes the ceiling, and keeps its peak
    small = AdaptiveLimit(ceiling=10, start=8, window_seconds=0.0, clock=clock)
    for _ in range(5):
        finish(small, 10, 0.1 * (_ + 1) ** -1, clock)
    assert small.limit == 10 and small.peak == 10 and limit.peak == 40


def test_adaptive_concurrency_backs_off_a_server_that_allows_four_at_a_time(tmp_path):
    """A server answering 429 (Retry-After: 0) whenever more than 4 requests are in flight: every
    row is scored, and the limit settles where the server stops refusing."""
    import threading

    import pandas as pd

    from emolia_bench.scorers.endpoint import EndpointScorer
    from emolia_bench.scorers.sham import sham_similarity

    from .servers import scripted_server

    active, lock, refused = [0], threading.Lock(), [0]

    def fault(payload, attempt):
        with lock:
            active[0] += 1
            crowded = active[0] > 4
            refused[0] += crowded
        import time

        time.sleep(0.01)
        with lock:
            active[0] -= 1
        return "429now" if crowded else None

    clips = tmp_path / "clips"
    clips.mkdir()
    rows = []
    for i in range(300):
        (clips / f"c{i}.wav").write_bytes(b"x" * 10)
        rows.append({"audio_path": f"c{i}.wav", "prompt": "calm", "item_stem": f"c{i}"})
    with scripted_server(fault=fault) as (server, url):
        scorer = EndpointScorer([url], workers=64, cache_dir=tmp_path / "cache", backoff_base=0.001, backoff_cap=0.01)
        result = scorer.score(pd.DataFrame(rows), clips)
    assert all(e is None for e in result.error)
    assert list(result.similarity) == [sham_similarity(f"c{i}", "calm") for i in range(300)]
    assert scorer.limit.limit <= 8 and scorer.limit.peak < 64  # backed off, never ran away
    assert refused[0] < 300  # far fewer refusals than rows: the limit followed the server


def test_an_http_proxy_from_the_environment_carries_the_requests(tmp_path, monkeypatch):
    """HTTP_PROXY with credentials: every request goes to the proxy in absolute form with a
    Proxy-Authorization header, and the answers come back through it."""
    import base64
    import http.client
    from http.server import BaseHTTPRequestHandler
    from urllib.parse import urlparse

    import pandas as pd

    from emolia_bench.scorers.endpoint import EndpointScorer
    from emolia_bench.scorers.sham import sham_similarity

    from .servers import scripted_server, serving

    seen = []

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            seen.append((self.path, self.headers.get("Proxy-Authorization")))
            target = urlparse(self.path)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            upstream.request("POST", target.path, body, {"Content-Type": "application/json"})
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    (tmp_path / "a.wav").write_bytes(b"x")
    rows = pd.DataFrame([{"audio_path": "a.wav", "prompt": p, "item_stem": "a"} for p in ("calm", "tense", "sad")])
    with scripted_server() as (_, url), serving(Proxy) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://user:secret@127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        result = EndpointScorer([url], workers=2, cache_dir=tmp_path / "cache").score(rows, tmp_path)
    assert list(result.similarity) == [sham_similarity("a", p) for p in ("calm", "tense", "sad")]
    token = "Basic " + base64.b64encode(b"user:secret").decode()
    assert sorted(seen) == [(url, token)] * 3  # absolute-form target, credentials sent


def test_adaptive_limit_undoes_a_halving_that_did_not_help_a_flaky_server():
    """A server failing 30 % of requests (overload-like) whatever the concurrency: the first
    halving is undone when the share stays, that share becomes tolerated, and the limit is not
    pinned low."""

    from emolia_bench.scorers.endpoint import AdaptiveLimit

    clock = Clock()
    limit = AdaptiveLimit(ceiling=64, start=32, window_seconds=0.2, clock=clock)

    def window(seconds):
        """One window of exactly ``limit`` requests, 3 in every 10 an overload, spread evenly."""
        n = limit.limit
        for i in range(n):
            limit.acquire()
            clock.now += seconds / n
            limit.release("overload" if i % 10 in (2, 5, 8) else "ok")

    window(0.25)  # 30 % > 20 %: halved to 16
    assert limit.limit == 16
    window(0.25)  # still 30 %: the halving did not help -> back to 32, 30 % tolerated from now on
    assert limit.limit == 32 and limit.baseline == pytest.approx(0.3, abs=0.05)
    for k in range(3):  # throughput rising at the tolerated share: it climbs again, to the ceiling
        window(0.25 / (k + 1))
    assert limit.limit == 64


def test_hostile_answers_are_error_rows_not_memory_or_crashes(tmp_path):
    """A body far larger than any answer (10 MB announced, streamed), a redirect to file:// and
    one to a URL with a port that is not a number: each is that row's error, read no further;
    the rows after them are scored on fresh connections."""
    import time
    from http.server import BaseHTTPRequestHandler

    import pandas as pd

    from emolia_bench.scorers.endpoint import EndpointScorer
    from emolia_bench.scorers.sham import sham_similarity

    from .servers import serving

    class Hostile(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stem = payload["item_stem"]
            if stem == "huge":
                self.send_response(200)
                self.send_header("Content-Length", str(10 * 1024 * 1024))
                self.end_headers()
                try:
                    for _ in range(160):
                        self.wfile.write(b"0" * 65536)
                except OSError:
                    pass  # the client stopped reading
                return
            if stem in ("file", "port"):
                self.send_response(307)
                self.send_header("Location", "file:///etc/passwd" if stem == "file" else "http://127.0.0.1:http/x")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.dumps({"similarity": sham_similarity(stem, payload["text"])}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    stems = ["a", "huge", "b", "file", "c", "port", "d"]
    for s in stems:
        (tmp_path / f"{s}.wav").write_bytes(s.encode())
    rows = pd.DataFrame([{"audio_path": f"{s}.wav", "prompt": "calm", "item_stem": s} for s in stems])
    with serving(Hostile) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/similarity"
        start = time.monotonic()
        result = EndpointScorer([url], workers=1, cache_dir=tmp_path / "cache").score(rows, tmp_path)
    assert time.monotonic() - start < 10
    errors = dict(zip(stems, result.error, strict=True))
    assert errors["huge"] == "bad response: response body over 1024 KiB"
    assert errors["file"].startswith("bad response: redirect to an unusable URL") and "file:///etc/passwd" in errors["file"]
    assert errors["port"].startswith("bad response: redirect to an unusable URL")
    for s in "abcd":
        assert errors[s] is None and result.similarity[stems.index(s)] == sham_similarity(s, "calm")
