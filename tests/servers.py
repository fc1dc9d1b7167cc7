"""In-process HTTP servers for tests: bound to 127.0.0.1 on a free port, stopped by the test."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from emolia_bench.scorers.sham import sham_similarity


class ScriptedHandler(BaseHTTPRequestHandler):
    """Answers like the sham server, unless the server's ``fault(payload, attempt)`` says
    otherwise: it returns None (answer normally) or one of '500', '429', '429now' (Retry-After: 0), 'nonjson', 'drop',
    'stall', 'nofield', 'nan', '400', '307' (a temporary redirect to the same URL)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def _reply(self, status, body: bytes, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        srv = self.server
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = (payload["item_stem"], payload["text"])
        with srv.lock:
            srv.payloads.append(payload)
            attempt = srv.attempts.get(key, 0)
            srv.attempts[key] = attempt + 1
        if srv.latency:
            time.sleep(srv.latency)
        fault = srv.fault(payload, attempt) if srv.fault else None
        if fault == "307":
            return self._reply(307, b"", [("Location", self.path.split("?")[0] + "?moved=1")])
        if fault == "500":
            return self._reply(500, b'{"error": "boom"}')
        if fault == "429":
            return self._reply(429, b'{"error": "slow down"}', [("Retry-After", "1")])
        if fault == "429now":
            return self._reply(429, b'{"error": "too many at once"}', [("Retry-After", "0")])
        if fault == "nonjson":
            return self._reply(200, b"<html>proxy error</html>")
        if fault == "nofield":
            return self._reply(200, b'{"result": 0.5}')
        if fault == "nan":
            return self._reply(200, b'{"similarity": NaN}')
        if fault == "400":
            return self._reply(400, b'{"error": "bad request"}')
        if fault == "drop":
            self.close_connection = True
            self.connection.close()
            return
        if fault == "stall":
            time.sleep(srv.stall)
            self.close_connection = True
            return
        body = json.dumps({"similarity": sham_similarity(payload["item_stem"], payload["text"])}).encode()
        self._reply(200, body)


@contextmanager
def serving(handler, **attributes):
    """A threading HTTP server with ``handler`` on 127.0.0.1 and a free port, the given attributes
    set on it (the handler reads them as ``self.server.<name>``); yields it, stops it after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    for name, value in attributes.items():
        setattr(server, name, value)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def scripted_server(fault=None, latency: float = 0.0, stall: float = 2.0):
    with serving(ScriptedHandler, fault=fault, latency=latency, stall=stall, lock=threading.Lock(),
                 payloads=[], attempts={}) as server:
        yield server, f"http://127.0.0.1:{server.server_address[1]}/v1/similarity"
