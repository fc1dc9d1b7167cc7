"""A local stand-in for a CLAP similarity endpoint (README: “4. sham_clap_server.py”), on the standard library.

POST /v1/similarity with the payload of the endpoint contract (README) -> ``{"similarity": …}``, the sham score of
``item_stem`` (or the stem of ``audio_filename``) and ``text``; GET /health -> 200.
Errors are JSON ``{"error": …}``: 400 bad JSON / missing or mistyped fields / a path outside the
dataset root, 404 unknown URL or clip, 411 no Content-Length, 413 body over the limit (refused
from the header, never read). A request must arrive whole within ``ShamHandler.timeout`` seconds:
every read is given only the time left (:class:`DeadlineReader`), so a client dripping a byte
at a time cannot hold a thread longer. File contents are never read
or echoed: with a dataset root the server only checks that the clip exists inside it.
"""

from __future__ import annotations

import io
import json
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath

from .paths import PathRefused, resolve_inside
from .scorers.sham import sham_similarity


class DeadlineReader(io.RawIOBase):
    """A connection's reads, each allowed only the time left until ``deadline`` (monotonic; None:
    the socket's own timeout). ``late`` says whether a read ran out of time, ``got`` how many bytes
    arrived since the deadline was set."""

    def __init__(self, sock):
        self.sock, self.deadline, self.late, self.got = sock, None, False, 0

    def start(self, seconds: float) -> None:
        self.deadline, self.late, self.got = time.monotonic() + seconds, False, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.late = True
                raise TimeoutError("request not received in time")
            self.sock.settimeout(left)
        try:
            n = self.sock.recv_into(buffer)
        except TimeoutError:
            self.late = True
            raise
        self.got += n
        return n


class ShamHandler(BaseHTTPRequestHandler):
    server_version = "emolia-sham/1"
    protocol_version = "HTTP/1.1"  # keep-alive, so clients reuse connections
    timeout = 10  # seconds for a whole request to arrive (and for any one read) before it is dropped
    # headers and body go out in two writes; without TCP_NODELAY, Nagle + delayed ACK stall
    # every keep-alive response by ~40 ms
    disable_nagle_algorithm = True

    # set on the server object by make_server
    @property
    def config(self):
        return self.server.config

    def log_message(self, fmt, *args):
        if self.config["verbose"]:
            super().log_message(fmt, *args)

    def refused(self, status: int, reason: str) -> None:
        """One line on stderr per refused request (never a traceback)."""
        import sys

        method = getattr(self, "command", None) or "-"
        path = (getattr(self, "path", None) or "-")[:120]
        print(f"refused {status} {method} {path} from {self.client_address[0]}: {reason}", file=sys.stderr)

    def setup(self):
        super().setup()
        self.reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self.reader)

    # every request must arrive whole — request line, headers and body — within `timeout`
    # seconds; a per-read timeout alone lets a client drip a byte every few seconds forever
    def handle_one_request(self):
        self.raw_requestline = b""
        self.reader.start(self.timeout)
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError, OSError):
            self.close_connection = True  # the client went away or was cut off: nothing to answer
        if self.reader.late:
            self.close_connection = True
            if self.reader.got:  # an idle keep-alive connection closed is no refusal
                self.refused(408, f"request not received within {self.timeout:g} s")

    def log_error(self, fmt, *args):  # http.server's "Request timed out" is said by refused()
        if self.config["verbose"]:
            super().log_error(fmt, *args)

    def received(self) -> None:
        """The request is in: the answer is written under the plain socket timeout."""
        self.reader.deadline = None
        self.connection.settimeout(self.timeout)

    def send_error(self, code, message=None, explain=None):
        """http.server's own refusals (a garbled request line, headers too long or too many, an
        unknown method) as JSON, like every other error here."""
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # a garbled line parses as HTTP/0.9, which has no status line
        try:
            self._send(code, {"error": message or HTTPStatus(code).phrase}, close=True)
        except OSError:
            pass

    def _not_allowed(self):
        self.refused(405, "method not allowed")
        if self.command == "HEAD":  # a HEAD answer has no body
            self.send_response_only(405)
            self.send_header("Allow", "GET, POST")
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            return
        self._send(405, {"error": "method not allowed; POST /v1/similarity or GET /health"}, close=True,
                   headers=(("Allow", "GET, POST"),))

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_TRACE = do_CONNECT = _not_allowed

    def _send(self, status: int, body: dict, close: bool = False, headers=()) -> None:
        self.received()
        data = (json.dumps(body) + "\n").encode()
        if status >= 400 and status != 405:  # 405 said its own line
            self.refused(status, str(body.get("error", "")))
        # status line and only the headers a client needs (no Server/Date): fewer to parse
        self.log_request(status)
        self.send_response_only(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.split("?")[0] == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": "unknown path; POST /v1/similarity or GET /health"})

    def do_POST(self):
        length_header = self.headers.get("Content-Length")
        if self.path.split("?")[0] != "/v1/similarity":
            # the body is not read, so this connection cannot be reused
            return self._send(404, {"error": "unknown path; POST /v1/similarity"}, close=True)
        if length_header is None:
            return self._send(411, {"error": "Content-Length required"}, close=True)
        try:
            length = int(length_header)
            if length < 0:
                raise ValueError
        except ValueError:
            return self._send(400, {"error": "bad Content-Length"}, close=True)
        if length > self.config["max_body"]:
            return self._send(413, {"error": f"body of {length} bytes exceeds the limit of {self.config['max_body']}"},
                              close=True)
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True  # the client hung up
            return
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return self._send(400, {"error": "body is not valid JSON"})
        except RecursionError:
            return self._send(400, {"error": "body is nested too deeply"})
        if not isinstance(payload, dict):
            return self._send(400, {"error": "body must be a JSON object"})
        text = payload.get("text")
        if not isinstance(text, str) or not text:
            return self._send(400, {"error": "'text' must be a non-empty string"})
        for field in ("item_stem", "audio_filename", "audio_path", "audio_base64"):
            if field in payload and payload[field] is not None and not isinstance(payload[field], str):
                return self._send(400, {"error": f"'{field}' must be a string"})
        stem = payload.get("item_stem") or (
            PurePosixPath(payload["audio_filename"]).stem if payload.get("audio_filename") else None)
        if not stem:
            return self._send(400, {"error": "need 'item_stem' or 'audio_filename'"})
        root = self.config["dataset_root"]
        if root is not None and payload.get("audio_path") is not None:
            try:
                clip = resolve_inside(root, payload["audio_path"])
                found = clip.is_file()
            except PathRefused as e:
                return self._send(400, {"error": str(e)})
            except OSError as e:  # a name too long for the file system, …
                return self._send(400, {"error": f"audio_path is not a usable path ({e.strerror or type(e).__name__})"})
            if not found:
                return self._send(404, {"error": "no clip at audio_path under the dataset root"})
        if self.config["latency"] > 0:
            time.sleep(self.config["latency"])
        self._send(200, {"similarity": sham_similarity(stem, text)})


class ShamServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        """One line, not a traceback; a client that simply went away is not worth one."""
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            print(f"error while serving {client_address[0]}: {type(error).__name__}: {error}", file=sys.stderr)


def make_server(host: str = "127.0.0.1", port: int = 8765, *, max_body_mb: float = 64.0, latency_ms: float = 0.0,
                dataset_root: Path | None = None, verbose: bool = False) -> ShamServer:
    server = ShamServer((host, port), ShamHandler)
    server.config = {
        "max_body": int(max_body_mb * 1024 * 1024),
        "latency": latency_ms / 1000.0,
        "dataset_root": Path(dataset_root).resolve() if dataset_root is not None else None,
        "verbose": verbose,
    }
    return server


def url_of(server: ShamServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}/v1/similarity"


