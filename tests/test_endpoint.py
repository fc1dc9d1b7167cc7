"""The endpoint path: server ↔ local sham equality, faults without a lost row, resume after
kill -9, payload shape, --no-audio-send. Servers bind 127.0.0.1 on free ports and stop here."""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

import pandas as pd
import pytest

from emolia_bench.sham_server import make_server, url_of

from .conftest import REPO, WORKED, run_script
from .servers import scripted_server


@pytest.fixture
def demo(demo_scored):
    return demo_scored


@pytest.fixture
def sham_server():
    server = make_server("127.0.0.1", 0, dataset_root=REPO / "dataset")
    t = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    t.start()
    yield url_of(server)
    server.shutdown()
    server.server_close()


def bench(demo, out, url, *extra):
    return run_script("benchmark.py", "--analysis-root", demo / "an", "--output-dir", out, "--endpoint", url,
                      "--cache-dir", out / "cache", *extra)


def preds(path):
    return pd.read_csv(path, keep_default_na=False)


def test_server_scores_equal_local_sham_on_every_row(demo, sham_server, tmp_path):
    r = bench(demo, tmp_path, sham_server)
    assert r.returncode == 0, r.stderr
    for subset in ("emolia-emo", "emolia-dim"):
        local, remote = preds(demo / "sham" / subset / "predictions.csv"), preds(tmp_path / subset / "predictions.csv")
        assert len(local) == len(remote) > 200
        assert (local["similarity"] == remote["similarity"]).all()  # exact, not approximate
        assert (local["pred_present"] == remote["pred_present"]).all()
        s = json.loads((tmp_path / subset / "summary.json").read_text())
        assert s["mode"] == "remote" and s["endpoint"] == sham_server


def test_faults_are_retried_and_no_row_is_lost(demo, tmp_path):
    kinds = ["500", "429", "nonjson", "drop", "stall", "nofield", "nan"]

    def fault(payload, attempt):
        # every 6th item fails once, cycling through the kinds of fault; retries then succeed
        h = sum(map(ord, payload["item_stem"] + payload["text"]))
        return kinds[(h // 6) % len(kinds)] if attempt == 0 and h % 6 == 0 else None

    with scripted_server(fault, stall=3.0) as (server, url):
        r = bench(demo, tmp_path, url, "--subset", "emolia-dim", "--timeout", "1", "--workers", "8")
        seen = {server.fault(p, 0) for p in server.payloads} - {None}
    assert r.returncode == 0, r.stderr
    assert seen == set(kinds)  # every kind of fault was really served
    local, remote = preds(demo / "sham/emolia-dim/predictions.csv"), preds(tmp_path / "emolia-dim/predictions.csv")
    assert len(remote) == len(local) and remote["ok"].all()
    assert (local["similarity"] == remote["similarity"]).all()


def test_rows_that_keep_failing_are_written_with_their_error(demo, tmp_path):
    def fault(payload, attempt):
        if payload["item_stem"].startswith("sample_00"):
            return "500"
        if payload["item_stem"].startswith("sample_01"):
            return "400"
        return None

    with scripted_server(fault) as (server, url):
        r = bench(demo, tmp_path, url, "--subset", "emolia-dim", "--max-retries", "2")
    assert r.returncode == 1
    p = preds(tmp_path / "emolia-dim/predictions.csv")
    failing = p[p["file_name"].isin(["sample_00.mp3", "sample_01.mp3"])]
    assert len(failing) > 0 and not failing["ok"].any()
    assert failing.loc[failing["file_name"] == "sample_00.mp3", "error"].str.contains("HTTP 500 after 3 attempts").all()
    assert failing.loc[failing["file_name"] == "sample_01.mp3", "error"].str.startswith("HTTP 400").all()
    assert p.loc[~p.index.isin(failing.index), "ok"].all()
    s = json.loads((tmp_path / "emolia-dim/summary.json").read_text())
    assert s["evaluation_errors"] == len(failing) and s["rows_evaluated_ok"] == len(p) - len(failing)
    assert f"{len(failing):,} scoring errors" in (tmp_path / "emolia-dim/report.md").read_text()
    # 400 is not retried; 500 is retried twice
    attempts = {k[0].split("__")[0]: v for k, v in server.attempts.items()}
    assert attempts["sample_01"] == 1 and attempts["sample_00"] == 3


def test_a_redirecting_endpoint_is_followed(demo, tmp_path):
    # every first request is answered 307 (method and body kept); requests follows it, as a
    # plain Session.post would, and every row is scored exactly without a retry
    with scripted_server(fault=lambda p, attempt: "307" if attempt == 0 else None) as (server, url):
        r = bench(demo, tmp_path, url, "--subset", "emolia-dim", "--limit", "12", "--max-retries", "0")
        attempts = list(server.attempts.values())
    assert r.returncode == 0, r.stderr
    local = preds(demo / "sham/emolia-dim/predictions.csv")
    remote = preds(tmp_path / "emolia-dim/predictions.csv")
    key = ["file_name", "dimension", "level", "polarity"]
    both = remote.merge(local, on=key, suffixes=("", "_sham"))
    assert len(both) == 12 and list(both["similarity"]) == list(both["similarity_sham"])
    assert attempts == [2] * 12  # the redirect and the redirected POST
    # the endpoint run shows its progress bar (rows done of total); the instant sham run none
    assert "emolia-dim (remote)" in r.stderr and "12/12" in r.stderr
    sham = run_script("benchmark.py", "--analysis-root", demo / "an", "--output-dir", tmp_path / "sham", "--subset",
                      "emolia-dim", "--limit", "12")
    assert sham.returncode == 0 and "sham_hash)" not in sham.stderr and "row/s" not in sham.stderr


def test_payload_shape_and_no_audio_send(demo, tmp_path):
    with scripted_server() as (server, url):
        assert bench(demo, tmp_path / "a", url, "--subset", "emolia-dim", "--limit", "5").returncode == 0
        sent = list(server.payloads)
        server.payloads.clear()
        assert bench(demo, tmp_path / "b", url, "--subset", "emolia-dim", "--limit", "5", "--no-audio-send",
                     "--fresh").returncode == 0
        bare = list(server.payloads)
    assert len(sent) == 5
    for p in sent:
        assert set(p) == {"text", "audio_filename", "audio_base64", "audio_path", "item_stem"}
        clip = REPO / "dataset" / p["audio_path"]
        assert base64.b64decode(p["audio_base64"], validate=True) == clip.read_bytes()
        assert p["audio_filename"] == clip.name and not p["audio_path"].startswith("/")
        assert p["item_stem"].startswith(clip.stem + "__")
    assert len(bare) == 5 and all("audio_base64" not in p for p in bare)


def test_kill_and_resume_repeats_only_in_flight_requests(demo, tmp_path):
    workers = 4
    with scripted_server(latency=0.01) as (server, url):
        cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(demo / "an"), "--output-dir",
               str(tmp_path / "out"), "--endpoint", url, "--cache-dir", str(tmp_path / "cache"), "--workers", str(workers),
               "--no-figures"]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while len(server.payloads) < 60 and time.time() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first = {(p["item_stem"], p["text"]) for p in server.payloads}
        assert 60 <= len(first) < 540  # killed mid-run
        assert not (tmp_path / "out").exists()  # nothing half-written
        server.payloads.clear()
        r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        second = [(p["item_stem"], p["text"]) for p in server.payloads]
    repeated = first & set(second)
    assert len(repeated) <= workers  # at most the requests that were in flight
    assert len(first) + len(second) - len(repeated) == 540
    assert "answered from the cache" in r.stdout


def test_identical_clip_bytes_do_not_share_an_answer(tmp_path):
    # the worked example's clips are all empty files: same sha256, different items
    import shutil
    shutil.copytree(WORKED / "input", tmp_path, dirs_exist_ok=True)
    assert run_script("analysis.py", cwd=tmp_path).returncode == 0
    assert run_script("benchmark.py", "--output-dir", "sham", cwd=tmp_path).returncode == 0
    with scripted_server() as (server, url):
        r = run_script("benchmark.py", "--output-dir", "remote", "--endpoint", url, "--cache-dir", "cache", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for s in ("emolia-emo", "emolia-dim"):
        assert (preds(tmp_path / "sham" / s / "predictions.csv")["similarity"]
                == preds(tmp_path / "remote" / s / "predictions.csv")["similarity"]).all()


def test_bad_endpoint_url_is_refused():
    r = run_script("benchmark.py", "--endpoint", "localhost:8765")
    assert r.returncode == 2 and "--endpoint" in r.stderr and "Traceback" not in r.stderr


class Dripping(BaseHTTPRequestHandler):
    """Answers every request one byte at a time, ``server.drip`` seconds apart: in the headers
    (``server.where == "headers"``) or in the body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b'{"similarity": 0.5}'
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n".encode()
        slow, fast = (head, b"") if self.server.where == "headers" else (b"", head)
        try:
            self.wfile.write(fast)
            for b in slow + (body if self.server.where == "body" else b""):
                self.wfile.write(bytes([b]))
                self.wfile.flush()
                time.sleep(self.server.drip)
            if self.server.where == "headers":
                self.wfile.write(body)
        except OSError:
            pass  # the client hung up: what a deadline does
        self.close_connection = True


@pytest.mark.parametrize("where", ["headers", "body"])
def test_the_timeout_is_a_deadline_for_the_whole_request(demo, tmp_path, where):
    from .servers import serving

    with serving(Dripping, drip=0.25, where=where) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/similarity"
        start = time.monotonic()
        r = bench(demo, tmp_path, url, "--subset", "emolia-dim", "--limit", "2", "--timeout", "1", "--max-retries", "0",
                  "--workers", "2")
        took = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    errors = pd.read_csv(tmp_path / "emolia-dim/predictions.csv", keep_default_na=False)["error"]
    assert (errors.str.startswith("timeout: no full answer within 1 s")).all()
    # each row: one attempt cut at ~1 s, rows in parallel; the dripping answer alone would take
    # 9–25 s
    assert took < 8, took


def test_a_dead_endpoint_ends_the_run_after_give_up_after(demo, tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    r = bench(demo, tmp_path, f"http://127.0.0.1:{port}/v1/similarity", "--subset", "emolia-dim", "--limit", "30",
              "--give-up-after", "1", "--workers", "4")
    took = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    errors = pd.read_csv(tmp_path / "emolia-dim/predictions.csv", keep_default_na=False)["error"]
    assert errors.str.startswith("gave up: no successful answer for 1 s").sum() >= 20
    # the cause is said on stderr, not only in predictions.csv
    assert "emolia-dim: no row could be scored:" in r.stderr and "connection error" in r.stderr
    assert took < 20, took  # 1 s without progress, the back-off in flight, start-up


def test_a_silent_endpoint_ends_the_whole_run_within_timeout_plus_give_up_after(demo, tmp_path):
    # The report found an endpoint that accepts and never answers ending a run after 602 s with
    # the defaults (and 92 s for --timeout 10 --give-up-after 10): rows queued for a request slot
    # were still tried after the run gave up, and the next subset started over. Both subsets,
    # 540 rows, must end within about --timeout + --give-up-after (3 + 3 s here).
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1024)
        start = time.monotonic()
        r = bench(demo, tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}", "--timeout", "3",
                  "--give-up-after", "3")
        took = time.monotonic() - start
    assert r.returncode == 1, r.stderr
    assert took < 3 + 3 + 4, took  # + start-up and the intervals of two subsets
    for subset in ("emolia-emo", "emolia-dim"):
        errors = pd.read_csv(tmp_path / subset / "predictions.csv", keep_default_na=False)["error"]
        assert errors.str.startswith("gave up: no successful answer for 3 s").all()


def test_retries_follow_progress_not_a_budget(demo, tmp_path):
    # 30 % of all attempts fail, whatever the attempt: a fixed run-wide budget ran out at such
    # rates; retries that follow progress finish every row
    def fault(payload, attempt):
        h = sum(map(ord, payload["item_stem"] + payload["text"])) + 7 * attempt
        return "500" if h % 10 < 3 else None

    with scripted_server(fault) as (server, url):
        r = bench(demo, tmp_path, url, "--subset", "emolia-dim", "--workers", "8")
    assert r.returncode == 0, r.stderr
    assert pd.read_csv(tmp_path / "emolia-dim/predictions.csv")["ok"].all()


def test_a_response_cache_on_a_full_disk_stops_saving_not_the_run(demo, sham_server, tmp_path, monkeypatch):
    # The report found 64 worker tracebacks and a run that never exited when the cache's disk was
    # full. Here every write to the cache file fails with ENOSPC (the module's own `open` is
    # replaced for appending): the run scores every row, says so once, and exits 0.
    import builtins
    import errno

    from emolia_bench import cache as cache_module

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def full_open(path, mode="r", *args, **kwargs):
        fh = builtins.open(path, mode, *args, **kwargs)
        return Full(fh) if "a" in mode and str(path).endswith(".jsonl") else fh

    monkeypatch.setattr(cache_module, "open", full_open, raising=False)
    r = bench(demo, tmp_path, sham_server, "--subset", "emolia-emo")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("cannot be written (No space left on device)") == 1 and "Traceback" not in r.stderr
    remote = preds(tmp_path / "emolia-emo/predictions.csv")
    assert remote["ok"].all() and len(remote) > 200
