"""sham_clap_server: the contract of README “4. sham_clap_server.py” and its safety (paths, body size, slow clients)."""

import json
import socket
import threading
import time

import pytest
import requests

from emolia_bench.scorers.sham import sham_similarity
from emolia_bench.sham_server import make_server, url_of

from .conftest import REPO, run_script


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "dataset"
    clip = root / "emolia-dim/data/TEMP/3/positive/sample_00.mp3"
    clip.parent.mkdir(parents=True)
    clip.write_bytes(b"SECRET-AUDIO-BYTES")
    (tmp_path / "outside.txt").write_text("SECRET-OUTSIDE")
    (root / "link_out.mp3").symlink_to(tmp_path / "outside.txt")
    (root / "folder_out").symlink_to(tmp_path)  # a folder inside the root that leads outside it
    srv = make_server("127.0.0.1", 0, dataset_root=root, max_body_mb=0.01)
    srv.RequestHandlerClass.timeout = 1  # a slow client is dropped after 1 s in these tests
    t = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    t.start()
    yield url_of(srv), srv
    srv.RequestHandlerClass.timeout = 10
    srv.shutdown()
    srv.server_close()


def post(url, payload, **kw):
    return requests.post(url, data=json.dumps(payload) if not isinstance(payload, bytes) else payload, timeout=5, **kw)


OK = {"text": "Normal tempo.", "item_stem": "sample_00__TEMP_3_positive", "audio_filename": "sample_00.mp3",
      "audio_path": "emolia-dim/data/TEMP/3/positive/sample_00.mp3"}


def test_scores_like_local_sham_and_health(server):
    url, _ = server
    r = post(url, OK)
    assert r.status_code == 200 and r.json() == {"similarity": 0.7706211205491895}  # upstream's test vector
    # without item_stem the stem of audio_filename is used
    r = post(url, {"text": "x", "audio_filename": "dir/EN_A.mp3"})
    assert r.json()["similarity"] == sham_similarity("EN_A", "x")
    assert requests.get(url.replace("/v1/similarity", "/health"), timeout=5).status_code == 200


@pytest.mark.parametrize("body,status", [
    (b"{not json", 400),
    (b"[1, 2]", 400),
    (json.dumps({"audio_filename": "a.mp3"}).encode(), 400),  # missing text
    (json.dumps({"text": 3, "audio_filename": "a.mp3"}).encode(), 400),  # wrong type
    (json.dumps({"text": "t", "item_stem": ["x"]}).encode(), 400),
    (json.dumps({"text": "t"}).encode(), 400),  # no stem at all
])
def test_malformed_requests_get_400_json(server, body, status):
    url, _ = server
    r = post(url, body)
    assert r.status_code == status and "error" in r.json()
    assert post(url, OK).status_code == 200  # still up


@pytest.mark.parametrize("path", [
    "../outside.txt", "/etc/passwd", "emolia-dim/../../outside.txt", "link_out.mp3", "emolia-dim\\..\\x",
    "folder_out/outside.txt", "folder_out/dataset/../outside.txt", ".",
])
def test_paths_escaping_the_root_are_refused_without_echoing_contents(server, path):
    url, _ = server
    r = post(url, {**OK, "audio_path": path})
    assert r.status_code == 400
    assert "SECRET" not in r.text
    assert post(url, OK).status_code == 200


def test_missing_clip_is_404_and_contents_never_echoed(server):
    url, _ = server
    r = post(url, {**OK, "audio_path": "emolia-dim/data/TEMP/3/positive/nope.mp3"})
    assert r.status_code == 404 and "SECRET" not in r.text
    assert "SECRET" not in post(url, OK).text


def test_unknown_path_is_404(server):
    url, _ = server
    assert post(url.replace("/v1/similarity", "/v2/other"), OK).status_code == 404
    assert requests.get(url.replace("/v1/similarity", "/nothing"), timeout=5).status_code == 404


def test_oversized_body_refused_from_the_header(server):
    url, srv = server
    host, port = srv.server_address[:2]
    # announce 1 GB but send only the headers: the server must answer 413 without waiting for the body
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"POST /v1/similarity HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000000000\r\n\r\n")
        reply = b""
        while chunk := s.recv(4096):  # the server closes the connection after answering
            reply += chunk
    assert reply.decode().startswith("HTTP/1.1 413") and b'"error"' in reply
    assert post(url, OK).status_code == 200


def test_slow_client_is_dropped_and_server_stays_up(server):
    url, srv = server
    host, port = srv.server_address[:2]
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(b"POST /v1/similarity HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"te")  # then stall
    start = time.time()
    s.settimeout(5)
    data = s.recv(4096)  # the server closes the socket after its timeout
    assert data == b"" and time.time() - start < 4
    s.close()
    assert post(url, OK).status_code == 200


def test_concurrent_requests_are_served_in_parallel(tmp_path):
    srv = make_server("127.0.0.1", 0, latency_ms=200)
    t = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    t.start()
    try:
        url = url_of(srv)
        results = []
        threads = [threading.Thread(target=lambda: results.append(post(url, OK).status_code)) for _ in range(10)]
        start = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        # ten 200 ms requests in well under 10 × 200 ms
        assert results == [200] * 10 and time.time() - start < 1.5
    finally:
        srv.shutdown()
        srv.server_close()


def test_script_help_and_bad_root():
    r = run_script("sham_clap_server.py", "--help")
    assert r.returncode == 0 and "--latency-ms" in r.stdout
    r = run_script("sham_clap_server.py", "--dataset-root", REPO / "no-such-folder")
    assert r.returncode == 2 and "not a folder" in r.stderr


def raw_exchange(srv, data: bytes, timeout: float = 5) -> bytes:
    """Send raw bytes on a fresh connection; everything the server sends until it closes."""
    host, port = srv.server_address[:2]
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(data)
        reply = b""
        try:
            while chunk := s.recv(65536):
                reply += chunk
        except TimeoutError:
            pass
    return reply


def json_error(reply: bytes) -> tuple[int, dict]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize("path", ["a" * 300 + ".mp3", "/".join(["b" * 200] * 40) + "/c.mp3"])  # a name, a path too long
def test_paths_too_long_for_the_file_system_get_a_json_400(server, path):
    url, srv = server
    r = post(url, {**OK, "audio_path": path})
    assert r.status_code == 400 and "usable path" in r.json()["error"]
    assert post(url, OK).status_code == 200


def test_deeply_nested_json_gets_a_json_400(server):
    url, _ = server
    r = post(url, b"[" * 3000 + b"]" * 3000)
    assert r.status_code == 400 and "nested" in r.json()["error"]


@pytest.mark.parametrize("method, status", [("PUT", 405), ("DELETE", 405), ("OPTIONS", 405), ("PATCH", 405), ("BREW", 501)])
def test_other_methods_get_a_json_error(server, method, status):
    _, srv = server
    got, body = json_error(raw_exchange(srv, f"{method} /v1/similarity HTTP/1.1\r\nHost: x\r\n\r\n".encode()))
    assert got == status and "error" in body


def test_head_gets_a_405_without_a_body(server):
    _, srv = server
    reply = raw_exchange(srv, b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 405") and reply.endswith(b"\r\n\r\n") and b"Allow: GET, POST" in reply


def test_garbage_and_oversized_headers_get_json_errors(server):
    _, srv = server
    got, body = json_error(raw_exchange(srv, b"\x16\x03\x01 garbage\r\n\r\n"))
    assert got == 400 and "error" in body
    got, body = json_error(raw_exchange(srv, b"POST /v1/similarity HTTP/1.1\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"))
    assert got == 431 and "error" in body


def test_a_dribbling_client_is_cut_off_in_time_and_logged_in_one_line(server, capfd):
    url, srv = server  # the fixture sets the whole-request limit to 1 s
    host, port = srv.server_address[:2]
    start = time.time()
    with socket.create_connection((host, port), timeout=10) as s:
        closed = False
        for b in b"POST /v1/similarity HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"z" * 40:
            try:
                s.sendall(bytes([b]))  # a byte every 0.2 s: each read is quick, the request never ends
                time.sleep(0.2)
                s.setblocking(False)
                closed = s.recv(1) == b""
                s.setblocking(True)
            except BlockingIOError:
                s.setblocking(True)
            except OSError:
                closed = True
            if closed:
                break
    assert closed and time.time() - start < 3
    assert post(url, OK).status_code == 200
    err = capfd.readouterr().err
    assert "refused 408" in err and "Traceback" not in err


def test_clients_that_hang_up_leave_no_tracebacks(server, capfd):
    url, srv = server
    host, port = srv.server_address[:2]
    for _ in range(20):
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"POST /v1/similarity HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"text\"")
    time.sleep(0.3)
    assert post(url, OK).status_code == 200
    assert "Traceback" not in capfd.readouterr().err
