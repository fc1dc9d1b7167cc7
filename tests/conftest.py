"""Shared paths and helpers for the test suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .zygote import ZYGOTE

REPO = Path(__file__).resolve().parents[1]

# Most tests run a script in a fresh interpreter. Where PYTHONDONTWRITEBYTECODE is set (these
# machines set it), none of them could cache the bytecode of pandas & co., so every one would
# compile them from source again: on a fresh clone the suite took 114 s instead of ~53 s. The
# scripts' behaviour does not depend on it; a user's own runs write bytecode by default anyway.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
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


def run_script(script: str, *args, cwd: Path | None = None, timeout: float = 120,
               figures: bool = False, full_draws: bool = False) -> subprocess.CompletedProcess:
    """Run one of the top-level scripts the way a user does, capturing its output.

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
    done = ZYGOTE.run(REPO / script, args, Path(cwd or REPO), timeout)  # a fresh process, pandas pre-imported
    if done is not None:
        return done
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=timeout)


def needs(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"{path} not present")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below root with its bytes: to prove a failed run changed nothing."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def worked_analysed(tmp_path_factory):
    """The worked example laid out as a project folder (annotations/, dataset/), analysed once
    per test module; tests that change files in it take a copy."""
    import shutil

    root = tmp_path_factory.mktemp("worked")
    shutil.copytree(WORKED / "input", root, dirs_exist_ok=True)
    assert run_script("analysis.py", cwd=root).returncode == 0
    return root
