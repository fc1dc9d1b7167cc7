"""Fan-out over replicas: two sham servers, one killed mid-run; no row lost, scores exact, and
a shared --model-tag lets a re-run on a different set of replicas resume from the cache."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pandas as pd

from .conftest import REPO, run_script


def start_server():
    proc = subprocess.Popen([sys.executable, str(REPO / "sham_clap_server.py"), "--port", "0", "--latency-ms", "10",
                             "--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = proc.stdout.readline().split()[-1]
    served = []
    threading.Thread(target=lambda: [served.append(1) for line in proc.stderr if "POST" in line], daemon=True).start()
    return proc, url, served


def test_two_replicas_one_killed_mid_run(tmp_path, demo_scored):
    shutil.copytree(demo_scored, tmp_path, dirs_exist_ok=True)
    a, url_a, served_a = start_server()
    b, url_b, served_b = start_server()
    try:
        def kill_b():
            deadline = time.time() + 60
            while len(served_b) < 60 and time.time() < deadline:
                time.sleep(0.01)
            os.kill(b.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_b)
        killer.start()
        r = run_script("benchmark.py", "--no-figures", "--analysis-root", tmp_path / "an", "--output-dir", tmp_path / "fan",
                       "--endpoint", url_a, "--endpoint", url_b, "--model-tag", "sham-v1", "--workers", "8",
                       "--timeout", "2", "--cache-dir", tmp_path / "cache", timeout=180)
        killer.join()
        assert r.returncode == 0, r.stderr
        assert b.wait(5) == -signal.SIGKILL  # replica B really died mid-run
        assert len(served_b) >= 60 and len(served_a) > 200  # both served; A took over the rest
        for subset in ("emolia-emo", "emolia-dim"):
            sham = pd.read_csv(tmp_path / "sham" / subset / "predictions.csv")
            fan = pd.read_csv(tmp_path / "fan" / subset / "predictions.csv")
            assert fan["ok"].all() and (fan["similarity"] == sham["similarity"]).all()
            assert json.loads((tmp_path / "fan" / subset / "summary.json").read_text())["endpoint"] == [url_a, url_b]

        # same model tag, a different set of replicas: everything comes from the shared cache
        before = len(served_a)
        r = run_script("benchmark.py", "--no-figures", "--analysis-root", tmp_path / "an", "--output-dir",
                       tmp_path / "again", "--endpoint", url_a, "--model-tag", "sham-v1", "--cache-dir", tmp_path / "cache")
        assert r.returncode == 0 and "0 requests" in r.stdout and len(served_a) == before
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
            p.wait()
