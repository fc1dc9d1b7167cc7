"""Subsets side by side: forked_map gives what running the jobs in turn gives — results in job
order, the first failing job's error — from other processes, without touching the parent's own
helper processes."""

import os
import sys

import pandas as pd
import pytest

from emolia_bench.errors import InputError
from emolia_bench.parallel import cores, forked_map

from .conftest import WORKED

FORKS = hasattr(os, "fork") and sys.platform == "linux" and cores() >= 2


def test_results_come_back_in_job_order_from_other_processes():
    def job(i):
        return i * i, os.getpid(), pd.DataFrame({"x": range(i)})  # a frame travels back too

    out = forked_map(job, 4)
    assert [o[0] for o in out] == [0, 1, 4, 9]
    assert [len(o[2]) for o in out] == [0, 1, 2, 3]
    assert out[0][1] == os.getpid()  # job 0 here
    if FORKS:
        assert len({o[1] for o in out}) == 4  # each other job in a process of its own
    assert all(o[1] == os.getpid() for o in forked_map(job, 4, fork=False))


@pytest.mark.parametrize("fork", [True, False])
def test_the_first_failing_job_in_order_is_raised_with_its_parts(fork):
    def job(i):
        if i >= 1:
            raise InputError(f"file{i}.csv", f"bad value in job {i}", row=i, column="c")
        return i

    with pytest.raises(InputError) as e:
        forked_map(job, 3, fork=fork)
    # job 1's error (not job 2's), rebuilt with every part it was raised with
    assert (e.value.file, e.value.message, e.value.row, e.value.column) == ("file1.csv", "bad value in job 1", 1, "c")
    assert str(e.value) == str(InputError("file1.csv", "bad value in job 1", row=1, column="c"))

    def job0_fails(i):
        raise ValueError(f"job {i}")

    with pytest.raises(ValueError, match="job 0"):
        forked_map(job0_fails, 3, fork=fork)


@pytest.mark.skipif(not FORKS, reason="runs jobs side by side only where the platform forks")
def test_a_job_whose_process_dies_is_an_error_and_the_parents_helpers_live_on():
    from emolia_bench.figures import Drawer

    drawer = Drawer()  # a helper process of the parent's, as analysis.py has while it analyses
    try:
        def job(i):
            if i == 1:
                os._exit(3)  # dies without an answer
            return i

        with pytest.raises(RuntimeError, match="ended without an answer"):
            forked_map(job, 2)
        assert forked_map(lambda i: i, 3) == [0, 1, 2]
        assert drawer.process.is_alive()  # the children ran none of the parent's exit handlers
    finally:
        drawer.close()


def test_subsets_analysed_side_by_side_equal_subsets_analysed_in_turn():
    from emolia_bench.analysis import analyze_subset
    from emolia_bench.io import load_annotations, load_flags, load_users
    from emolia_bench.outputs import csv_bytes, json_bytes
    from emolia_bench.subsets import DIM, EMO

    def job(i):
        subset = (EMO, DIM)[i]
        folder = WORKED / "input" / "annotations" / subset.name
        r = analyze_subset(subset, load_annotations(folder / "annotations.csv", subset), load_users(folder / "users.csv"),
                           load_flags(folder / "flags.csv", subset) if subset.has_flags else None)
        return json_bytes(r.summary), {f: csv_bytes(t) for f, t in r.tables.items()}, csv_bytes(r.votes)

    assert forked_map(job, 2) == forked_map(job, 2, fork=False)


def test_analysis_py_with_its_subsets_side_by_side_writes_the_same_bytes(tmp_path, monkeypatch):
    # The worked example is far below the size from which analysis.py forks; with the threshold
    # at 0 it analyses its two subsets side by side. Every file it writes — tables, summaries,
    # reports and figures (the second subset's charts are sent to the drawing process only once
    # its process is back) — must be the bytes of the usual run.
    import runpy
    import shutil

    from emolia_bench import parallel

    from .conftest import REPO, run_script, snapshot

    root = tmp_path / "worked"
    shutil.copytree(WORKED / "input", root)
    assert run_script("analysis.py", "--output-root", tmp_path / "in_turn", cwd=root, figures=True).returncode == 0
    monkeypatch.setattr(parallel, "SIDE_BY_SIDE_ROWS", 0)
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "argv", ["analysis.py", "--output-root", str(tmp_path / "side_by_side")])
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO / "analysis.py"), run_name="__main__")
    assert done.value.code == 0
    assert len(forks) == (1 if FORKS else 0)  # the second subset went to a process of its own
    got, want = snapshot(tmp_path / "side_by_side"), snapshot(tmp_path / "in_turn")
    assert any(name.endswith(".png") for name in want) and got == want
