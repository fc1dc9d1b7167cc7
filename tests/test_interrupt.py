"""Ctrl-C ends a run at once, with one line and exit 130, even where the process was started with
SIGINT ignored (as a shell's background job is): a process of its own, as a user's."""

import signal
import socket
import subprocess
import sys
import time

from .conftest import REPO, snapshot


def test_ctrl_c_during_an_endpoint_run_against_a_silent_server(demo_scored, tmp_path):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        out = tmp_path / "out"
        cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(demo_scored / "an"), "--output-dir",
               str(out), "--endpoint", f"http://127.0.0.1:{port}/v1/similarity", "--cache-dir", str(tmp_path / "cache"),
               "--no-figures"]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        time.sleep(2.0)  # past start-up: requests are in flight, waiting on the silent server
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert took < 2, took
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "interrupted; previous outputs are left as they were"
    assert not out.exists() or snapshot(out) == {}  # nothing half-written
