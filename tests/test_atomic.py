"""A run killed at any moment leaves every previous output complete: each file is either the
old version or the new one, never a mix or a truncation. Tested by kill -9 at random points."""

import os
import random
import signal
import subprocess
import sys
import time

from .conftest import REPO, run_script, snapshot


def test_analysis_killed_at_random_points_leaves_complete_outputs(tmp_path):
    sys.path.insert(0, str(REPO / "bench"))
    from synth import write_exports

    old_in, new_in = tmp_path / "old", tmp_path / "new"
    write_exports(old_in, 0.3)
    write_exports(new_in, 0.35)  # different data: every output file differs
    out = tmp_path / "out"
    assert run_script("analysis.py", "--annotations-root", new_in / "annotations", "--output-root", tmp_path / "ref").returncode == 0
    new = snapshot(tmp_path / "ref")
    assert run_script("analysis.py", "--annotations-root", old_in / "annotations", "--output-root", out).returncode == 0
    old = snapshot(out)
    assert set(old) == set(new) and sum(old[k] != new[k] for k in old) >= len(old) - 2

    cmd = [sys.executable, str(REPO / "analysis.py"), "--annotations-root", str(new_in / "annotations"),
           "--output-root", str(out)]
    rng = random.Random(1)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    duration = time.perf_counter() - start
    for _ in range(6):
        # restore the old outputs, then kill a new run somewhere in its lifetime (late bias: writing)
        for rel, data in old.items():
            (out / rel).write_bytes(data)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(duration * rng.uniform(0.5, 1.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        now = snapshot(out)
        for rel, data in now.items():
            if rel.rsplit("/", 1)[-1].startswith("."):
                continue  # a temporary file of the killed run, cleaned by the next run
            assert data in (old[rel], new[rel]), f"{rel} is neither the old nor the new version"
    # a later successful run replaces everything and leaves no temporary files behind
    subprocess.run(cmd, check=True, capture_output=True)
    assert snapshot(out) == new
