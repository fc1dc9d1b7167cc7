"""scripts/fetch_upstream.py against a local HTTP server laid out like the upstream repository
(``/<commit>/<path>``): the real exports of ../shared/real when present (their sha256 must
match the pinned ones), and, without them, the refusals every download must make — a corrupted
file, an HTTP error, a dropped connection, an unpinned commit — each exit 2 with nothing
half-written and the files fetched before it intact."""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import pytest

from .conftest import REAL, needs, run_script, snapshot
from .servers import serving

FETCH = "scripts/fetch_upstream.py"


def pinned():
    """(commit, [(upstream path, local path, sha256)]) as the script pins them."""
    import importlib.util

    from .conftest import REPO

    spec = importlib.util.spec_from_file_location("fetch_upstream", REPO / FETCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PINNED_COMMIT, module.FILES


def real_tree(commit: str) -> dict[str, bytes]:
    """The byte-exact captures of ../shared/real at the URLs upstream serves them from."""
    where = {
        "annotations/emolia-emo/annotations.csv": REAL / "emolia-emo/annotations/emolia-emo/annotations.csv",
        "annotations/emolia-emo/users.csv": REAL / "emolia-emo/annotations/emolia-emo/users.csv",
        "annotations/emolia-dim/annotations.csv": REAL / "emolia-dim/annotations/emolia-dim/annotations.csv",
        "annotations/emolia-dim/users.csv": REAL / "emolia-dim/annotations/emolia-dim/users.csv",
        "dataset/emolia-dim/variables.json": REAL / "emolia-dim/dataset/emolia-dim/variables.json",
    }
    return {f"/{commit}/{path}": file.read_bytes() for path, file in where.items()}


class TreeHandler(BaseHTTPRequestHandler):
    """Serves ``server.tree`` (URL path -> bytes); ``server.drop`` names paths whose connection
    is cut after half the body (Content-Length announces all of it)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.server.tree.get(self.path)
        self.server.requested.append(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path in self.server.drop:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@contextmanager
def tree_server(tree: dict[str, bytes], drop=()):
    with serving(TreeHandler, tree=tree, drop=set(drop), requested=[]) as server:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"


def fetch(url, out, *extra):
    return run_script(FETCH, "--base-url", url, "--out", out, "--timeout", "5", *extra, timeout=60)


def visible(root):
    """Files below root that a user would see (no temporary files left behind either)."""
    return snapshot(root) if root.exists() else {}


@needs(REAL)
def test_fetches_the_real_exports_and_analysis_runs_on_them(tmp_path):
    commit, files = pinned()
    tree = real_tree(commit)
    with tree_server(tree) as (server, url):
        r = fetch(url, tmp_path / "up")
        assert r.returncode == 0, r.stderr
        got = snapshot(tmp_path / "up")
        # every file in place, byte-exact, and its hash the pinned one
        for upstream_path, rel, sha, _ in files:
            assert got[rel] == tree[f"/{commit}/{upstream_path}"]
            assert hashlib.sha256(got[rel]).hexdigest() == sha
        assert len(got) == len(files)
        # a second run finds every file present and checked: it downloads nothing
        server.requested.clear()
        r = fetch(url, tmp_path / "up")
        assert r.returncode == 0 and server.requested == [] and r.stdout.count("already present") == len(files)
    r = run_script("analysis.py", "--annotations-root", tmp_path / "up" / "annotations", "--output-root", tmp_path / "an")
    assert r.returncode == 0, r.stderr
    emo = json.loads((tmp_path / "an/emolia-emo/summary.json").read_text())
    assert emo["items_total"] == 7988  # SOURCE.md: 7,988 items in the emo export


@needs(REAL)
def test_a_corrupted_real_file_is_refused_and_earlier_downloads_stay(tmp_path):
    commit, files = pinned()
    tree = real_tree(commit)
    bad = f"/{commit}/annotations/emolia-dim/annotations.csv"  # the third file in the pinned order
    tree[bad] = tree[bad].replace(b"yes", b"no", 1)  # one changed answer
    with tree_server(tree) as (_, url):
        r = fetch(url, tmp_path / "up")
    assert r.returncode == 2 and "sha256" in r.stderr and bad in r.stderr and "Traceback" not in r.stderr
    got = visible(tmp_path / "up")
    assert set(got) == {rel for _, rel, _, _ in files[:2]}  # the two before it, intact; nothing after
    assert not any(p.name.startswith(".") for p in (tmp_path / "up").rglob("*"))


def synthetic_tree(commit, files):
    return {f"/{commit}/{upstream_path}": f"content of {upstream_path}\n".encode() for upstream_path, _, _, _ in files}


def test_hash_mismatch_is_exit_2_and_writes_nothing(tmp_path):
    commit, files = pinned()
    with tree_server(synthetic_tree(commit, files)) as (_, url):  # right layout, wrong bytes
        r = fetch(url, tmp_path / "up")
    assert r.returncode == 2 and "does not match the pinned" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1
    assert visible(tmp_path / "up") == {}


def test_http_error_and_dropped_connection_are_exit_2(tmp_path):
    commit, files = pinned()
    tree = synthetic_tree(commit, files)
    del tree[f"/{commit}/{files[0][0]}"]
    with tree_server(tree) as (_, url):
        r = fetch(url, tmp_path / "a")
    assert r.returncode == 2 and "HTTP 404" in r.stderr and "Traceback" not in r.stderr
    assert visible(tmp_path / "a") == {}
    tree = synthetic_tree(commit, files)
    with tree_server(tree, drop={f"/{commit}/{files[0][0]}"}) as (_, url):
        r = fetch(url, tmp_path / "b")
    assert r.returncode == 2 and "download failed" in r.stderr and "Traceback" not in r.stderr
    assert visible(tmp_path / "b") == {}


def test_unpinned_commit_needs_the_flag_and_prints_hashes(tmp_path):
    commit, files = pinned()
    other = "0" * 40
    tree = synthetic_tree(other, files)
    with tree_server(tree) as (server, url):
        r = fetch(url, tmp_path / "up", "--commit", other)
        assert r.returncode == 2 and "--allow-unpinned" in r.stderr and server.requested == []
        r = fetch(url, tmp_path / "up", "--commit", other, "--allow-unpinned")
    assert r.returncode == 0, r.stderr
    for upstream_path, rel, _, _ in files:
        data = tree[f"/{other}/{upstream_path}"]
        assert (tmp_path / "up" / rel).read_bytes() == data
        assert hashlib.sha256(data).hexdigest() in r.stdout  # printed, for the user to pin


@pytest.mark.parametrize("flag", ["--help"])
def test_help_names_every_option(flag):
    r = run_script(FETCH, flag)
    assert r.returncode == 0
    for option in ("--out", "--commit", "--allow-unpinned", "--base-url"):
        assert option in r.stdout


class HostileHandler(TreeHandler):
    """``server.gzip``: paths whose body is sent gzip-compressed (Content-Encoding: gzip);
    ``server.drip``: paths whose body is sent one byte every half second."""

    def do_GET(self):
        import gzip
        import time

        body = self.server.tree[self.path]
        self.server.requested.append(self.path)
        self.send_response(200)
        if self.path in self.server.gzip:
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path in self.server.drip:
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:  # the client gave up
                pass
            return
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading (it refused the body): nothing to report
            pass


@contextmanager
def hostile_server(tree, gzip=(), drip=()):
    with serving(HostileHandler, tree=tree, drop=set(), requested=[], gzip=set(gzip), drip=set(drip)) as server:
        yield server, f"http://127.0.0.1:{server.server_address[1]}"


def one_line_refusal(r):
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("encoding", ["plain", "gzip"])
def test_a_body_larger_than_the_pinned_file_is_cut_off(tmp_path, encoding):
    # 20 MB of zeros where 3.9 MB are pinned; gzip-compressed it is ~20 kB on the wire and would
    # inflate to 20 MB: the bound counts decoded bytes, so neither is written (or held) whole
    commit, files = pinned()
    tree = synthetic_tree(commit, files)
    first = f"/{commit}/{files[0][0]}"
    tree[first] = bytes(20_000_000)
    with hostile_server(tree, gzip={first} if encoding == "gzip" else ()) as (_, url):
        r = fetch(url, tmp_path / "up")
    one_line_refusal(r)
    assert f"more than {files[0][3]:,} bytes" in r.stderr and visible(tmp_path / "up") == {}


def test_a_server_that_drips_is_given_up_on_at_the_timeout(tmp_path):
    import time

    commit, files = pinned()
    tree = synthetic_tree(commit, files)
    first = f"/{commit}/{files[0][0]}"
    with hostile_server(tree, drip={first}) as (_, url):
        start = time.monotonic()
        r = run_script(FETCH, "--base-url", url, "--out", tmp_path / "up", "--timeout", "2")
        took = time.monotonic() - start
    one_line_refusal(r)
    assert "longer than --timeout 2" in r.stderr and took < 6, took
    assert visible(tmp_path / "up") == {}


def test_destinations_that_cannot_be_written_are_refused_before_fetching(tmp_path):
    commit, files = pinned()
    with tree_server(synthetic_tree(commit, files)) as (server, url):
        (tmp_path / "file").write_text("x")
        r = fetch(url, tmp_path / "file")
        one_line_refusal(r)
        assert "is not a folder" in r.stderr and server.requested == []
        (tmp_path / "up" / files[2][1]).mkdir(parents=True)  # a folder where a file must go
        r = fetch(url, tmp_path / "up")
        one_line_refusal(r)
        assert "is not a file" in r.stderr and server.requested == []
        r = fetch(url, tmp_path / "t", "--timeout", "0")
        one_line_refusal(r)
        assert "--timeout" in r.stderr and server.requested == []


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path, monkeypatch):
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the script's last write of each file
    commit, files = pinned()
    with tree_server(synthetic_tree(commit, files)) as (_, url):
        r = fetch(url, tmp_path / "up")
    one_line_refusal(r)
    assert "No space left on device" in r.stderr and files[0][1].split("/")[-1] in r.stderr
    assert not [p for p in (tmp_path / "up").rglob("*") if p.is_file()]
