"""Shared paths and helpers for the test suite."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from emolia_bench.cli import invoke

REPO = Path(__file__).resolve().parents[1]
# The worked example lives in the repository (a clone tests itself); the real exports stay
# outside it and the tests that read them are skipped when the folder is absent.
WORKED = REPO / "tests" / "fixtures" / "worked_example"
SHARED = REPO.parent / "shared"
REAL = SHARED / "real"

EMO_HEADER = "annotation_id,username,source_emotion,queried_emotion,task_type,file_name,rating,reaction_time_ms,sample_time_ms,created_at\n"
DIM_HEADER = "annotation_id,username,dimension,level,polarity,file_name,rating,reaction_time_ms,sample_time_ms,created_at\n"
USERS_HEADER = "username,is_active,is_admin,onboarded,annotation_count,created_at,age,languages,gender,consent,degree,expertise,listening_setup\n"


def user_row(name: str) -> str:
    return f'{name},1,0,True,0,2026-03-30T16:54:45.577Z,30,"English,German",Female,True,MSc,3,External speakers\n'


# scripts that draw PNG figures unless told --no-figures
FIGURE_SCRIPTS = {"analysis.py", "benchmark.py", "compare.py"}
# scripts whose clip-bootstrap draws a test may lower (analysis.py insists on at least 1,000)
DRAWS_SCRIPTS = {"benchmark.py", "compare.py"}
TEST_DRAWS = "200"


_SCRIPTS: dict[str, object] = {}


def script_module(script: str):
    """A top-level script loaded as a module (once per test process), for its ``main(argv)``."""
    if script not in _SCRIPTS:
        spec = importlib.util.spec_from_file_location(f"script_{Path(script).stem}", REPO / script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _SCRIPTS[script] = module
    return _SCRIPTS[script]


def run_script(script: str, *args, cwd: Path | None = None, timeout: float = 120,
               figures: bool = False, full_draws: bool = False) -> subprocess.CompletedProcess:
    """Run one of the top-level scripts as a user does — its argv, its working folder, its exit
    code (bad input 2, as the script's own ``cli.run`` maps it), its stdout and stderr — but in
    this process, through its ``main(argv)``: no interpreter to start for each run. The tests that
    need a process of their own (kill -9, Ctrl-C, servers, the exit status of the real entry)
    start one with subprocess. ``timeout`` is kept for those callers' symmetry; an in-process run
    is not timed out.

    Figures cost about a second per run (matplotlib's import and drawing) and most tests do
    not look at them, so ``--no-figures`` is added unless ``figures=True`` (the tests of the
    figures, and the ones that check the full default output set, ask for them). Likewise the
    benchmark's and compare's bootstraps run 200 draws instead of 1,000 (a third of a benchmark
    run's time) unless ``full_draws=True``: no test here checks an interval's width, and the
    statistics behind the intervals are tested in-process against explicit resamples."""
    args = [str(a) for a in args]
    if script in FIGURE_SCRIPTS and not figures and "--no-figures" not in args and "--help" not in args:
        args.append("--no-figures")
    if script in DRAWS_SCRIPTS and not full_draws and "--bootstrap-draws" not in args and "--help" not in args:
        args += ["--bootstrap-draws", TEST_DRAWS]
    main = script_module(script).main
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd or REPO)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = invoke(main, args)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess([sys.executable, script, *args], code, out.getvalue(), err.getvalue())


def demo_clips_with_one_broken(rels, broken: str, root: Path) -> Path:
    """A copy of the demo clips ``rels`` under ``root``, with ``broken`` replaced by bytes that are
    not audio."""
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes((REPO / "dataset" / rel).read_bytes())
    (root / broken).write_bytes(b"this is not audio")
    return root


def needs(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not present")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below root with its bytes: to prove a failed run changed nothing."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def worked_analysed(tmp_path_factory):
    """The worked example laid out as a project folder (annotations/, dataset/), analysed once
    (analysis_outputs/); tests read it, and tests that change files in it take a copy."""
    import shutil

    root = tmp_path_factory.mktemp("worked")
    shutil.copytree(WORKED / "input", root, dirs_exist_ok=True)
    assert run_script("analysis.py", cwd=root).returncode == 0
    return root


@pytest.fixture(scope="session")
def demo_scored(tmp_path_factory):
    """The committed demo annotations analysed (``an/``) and scored by the sham scorer
    (``sham/``), once; tests read it."""
    root = tmp_path_factory.mktemp("demo")
    assert run_script("analysis.py", "--output-root", root / "an").returncode == 0
    r = run_script("benchmark.py", "--analysis-root", root / "an", "--output-dir", root / "sham")
    assert r.returncode == 0, r.stderr
    return root
