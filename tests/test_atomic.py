"""A run killed at any moment leaves every previous output complete: each file is either the
old version or the new one, never a mix or a truncation.

The kills are deterministic: the run is started through a small driver that sends SIGKILL to
its own process at a chosen step of the writer — after the k-th staged file is fsynced, or
just before the k-th rename — so every phase of the write is hit on every run of the suite,
without sleeping for a random fraction of a measured duration."""

import shutil
import subprocess
import sys

import pytest

from .conftest import REPO, snapshot

# Runs analysis.py as a user would, except that the k-th call of os.<function> kills the
# process (SIGKILL: no cleanup, no finally blocks, exactly like kill -9 from outside).
DRIVER = """
import os, runpy, signal, sys
function, k = sys.argv[1], int(sys.argv[2])
original, calls = getattr(os, function), [0]
def killing(*args, **kwargs):
    calls[0] += 1
    if calls[0] == k:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(os, function, killing)
sys.argv = sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def analysis_cmd(annotations, out):
    return [str(REPO / "analysis.py"), "--annotations-root", str(annotations), "--output-root", str(out), "--no-figures"]


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory):
    """Outputs of two different exports into the same folder layout: the old and the new."""
    sys.path.insert(0, str(REPO / "bench"))
    from synth import write_exports

    root = tmp_path_factory.mktemp("atomic")
    for name, scale in (("old", 0.03), ("new", 0.035)):  # different data: every output file differs
        write_exports(root / name, scale)
    procs = [subprocess.Popen([sys.executable, *analysis_cmd(root / n / "annotations", root / f"{n}_out")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for n in ("old", "new")]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    old, new = snapshot(root / "old_out"), snapshot(root / "new_out")
    assert set(old) == set(new) and sum(old[k] != new[k] for k in old) >= len(old) - 2
    return root, old, new


def test_analysis_killed_at_each_phase_leaves_complete_outputs(two_versions):
    root, old, new = two_versions
    n = len(old)
    same = sum(old[rel] == new[rel] for rel in old)
    # (function, k): killed while staging (after 1 and after all-but-one fsyncs: no target
    # touched yet), and just before the 1st, a middle and the last rename (some targets new).
    cases = [("fsync", 2), ("fsync", n), ("replace", 1), ("replace", n // 2), ("replace", n)]
    procs = []
    for i, (function, k) in enumerate(cases):
        out = root / f"killed_{i}"
        shutil.copytree(root / "old_out", out)
        cmd = [sys.executable, "-c", DRIVER, function, str(k), *analysis_cmd(root / "new" / "annotations", out)]
        procs.append((function, k, out, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    for function, k, out, proc in procs:
        assert proc.wait(timeout=120) == -9, f"the run was not killed at {function} #{k}"
        now = {rel: data for rel, data in snapshot(out).items() if not rel.rsplit("/", 1)[-1].startswith(".")}
        assert set(now) == set(old)
        replaced = [rel for rel, data in now.items() if data == new[rel] != old[rel]]
        for rel, data in now.items():
            assert data in (old[rel], new[rel]), f"{rel} is neither the old nor the new version ({function} #{k})"
        # the kill point decides exactly how many targets were already replaced
        # (less any file that happens to be the same in both versions)
        expected = 0 if function == "fsync" else k - 1
        assert expected - same <= len(replaced) <= expected, (function, k, replaced)
    # a later successful run replaces everything and leaves no temporary files behind
    out = procs[-1][2]
    subprocess.run([sys.executable, *analysis_cmd(root / "new" / "annotations", out)], check=True, capture_output=True)
    assert snapshot(out) == new
    assert not any(p.name.startswith(".") for p in out.rglob("*"))
