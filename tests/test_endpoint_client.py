"""The endpoint client's own parts, in-process: a server that allows four requests at a time, an
HTTP proxy from the environment, and hostile answers. Servers bind 127.0.0.1 on free ports and stop here."""

import json


def test_a_server_that_allows_four_at_a_time_gets_every_row_scored(tmp_path):
    """A server answering 429 (Retry-After: 0) whenever more than 4 requests are in flight: the
    retries (with back-off) score every row with the sham's exact value."""
    import threading
    import time

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
        time.sleep(0.01)
        with lock:
            active[0] -= 1
        return "429now" if crowded else None

    clips = tmp_path / "clips"
    clips.mkdir()
    rows = []
    for i in range(100):
        (clips / f"c{i}.wav").write_bytes(b"x" * 10)
        rows.append({"audio_path": f"c{i}.wav", "prompt": "calm", "item_stem": f"c{i}"})
    with scripted_server(fault=fault) as (server, url):
        scorer = EndpointScorer([url], workers=16, cache_dir=tmp_path / "cache")
        result = scorer.score(pd.DataFrame(rows), clips)
    assert all(e is None for e in result.error)
    assert list(result.similarity) == [sham_similarity(f"c{i}", "calm") for i in range(100)]
    assert refused[0] > 0 and scorer.stats["retries"] >= refused[0]  # the refusals really happened, and were retried


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
