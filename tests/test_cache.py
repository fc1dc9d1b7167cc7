"""The response and embedding caches: a torn last line costs no later answer, and one process
at a time uses a cache."""

import subprocess
import sys
import time

import pytest

from emolia_bench.cache import ResponseCache
from emolia_bench.errors import InputError

from .conftest import REPO
from .servers import scripted_server


def test_a_torn_last_line_does_not_swallow_the_next_answer(tmp_path):
    cache = ResponseCache(tmp_path, "model")
    cache.put("k1", 0.25)
    cache.close()
    with open(cache.path, "a", encoding="utf-8") as f:
        f.write('{"k": "k2", "v": 0.')  # a writer killed mid-line
    cache = ResponseCache(tmp_path, "model")
    assert cache.get("k1") == 0.25 and cache.get("k2") is None
    cache.put("k3", -0.5)
    cache.close()
    again = ResponseCache(tmp_path, "model")
    assert again.get("k1") == 0.25 and again.get("k3") == -0.5  # k3 was not glued to the fragment
    again.close()


def test_a_cache_is_used_by_one_process_at_a_time(tmp_path):
    first = ResponseCache(tmp_path, "model")
    # flock locks are per open file description: a second store, even in this process, is refused
    holder = subprocess.run([sys.executable, "-c", (
        "import sys; from emolia_bench.cache import ResponseCache\n"
        "from emolia_bench.errors import InputError\n"
        "try:\n    ResponseCache(sys.argv[1], 'model')\nexcept InputError as e:\n    print(e)\n"), str(tmp_path)],
        capture_output=True, text=True, timeout=60)
    import os

    assert f"pid {os.getpid()}" in holder.stdout and "another --cache-dir" in holder.stdout
    first.close()
    second = ResponseCache(tmp_path, "model")  # free again once the first is closed
    second.close()
    with pytest.raises(InputError):
        a = ResponseCache(tmp_path, "other")
        try:
            ResponseCache(tmp_path, "other")
        finally:
            a.close()


def test_two_endpoint_runs_on_one_cache_do_not_both_request_the_rows(tmp_path):
    from .conftest import run_script

    assert run_script("analysis.py", "--output-root", tmp_path / "an").returncode == 0
    # the first run takes about 4.5 s (30 rows, one at a time, 150 ms each): the second starts inside it,
    # even on a loaded machine where a start-up takes seconds
    with scripted_server(latency=0.15) as (server, url):
        cmd = [sys.executable, str(REPO / "benchmark.py"), "--analysis-root", str(tmp_path / "an"), "--subset",
               "emolia-dim", "--limit", "30", "--endpoint", url, "--cache-dir", str(tmp_path / "cache"), "--workers", "1",
               "--no-figures"]
        first = subprocess.Popen([*cmd, "--output-dir", str(tmp_path / "one")], cwd=REPO,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 30
        while not server.payloads and time.time() < deadline:
            time.sleep(0.02)
        second = subprocess.run([*cmd, "--output-dir", str(tmp_path / "two")], cwd=REPO, capture_output=True,
                                text=True, timeout=60)
        assert first.wait(timeout=120) == 0, first.stderr.read()
    assert second.returncode == 2 and "in use by another running process" in second.stderr
    assert "Traceback" not in second.stderr and not (tmp_path / "two").exists()
    assert len(server.payloads) == len({(p["item_stem"], p["text"]) for p in server.payloads}) == 30
