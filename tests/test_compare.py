"""compare.py on runs where the answer is known, and refusals of runs that cannot be compared."""

import json
import shutil

import pandas as pd
import pytest

from .conftest import WORKED, run_script


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    p = tmp_path_factory.mktemp("cmp")
    shutil.copytree(WORKED / "input", p, dirs_exist_ok=True)
    assert run_script("analysis.py", "--no-figures", cwd=p).returncode == 0
    assert run_script("benchmark.py", "--no-figures", "--output-dir", "runs/a", cwd=p).returncode == 0
    return p


def copy_run(project, src, dst):
    shutil.copytree(project / "runs" / src, project / "runs" / dst, dirs_exist_ok=True)
    return project / "runs" / dst


def test_identical_runs_differ_by_zero_with_p_one(project, tmp_path):
    copy_run(project, "a", "same")
    r = run_script("compare.py", "runs/a", "runs/same", "--output-dir", tmp_path, cwd=project, figures=True)
    assert r.returncode == 0, r.stderr
    pairs = pd.read_csv(tmp_path / "pairwise.csv")
    assert (pairs["difference"] == 0).all()
    assert (pairs["difference_ci_low"] == 0).all() and (pairs["difference_ci_high"] == 0).all()
    assert (pairs["p_bootstrap"] == 1).all() and (pairs["p_mcnemar"] == 1).all()
    assert (pairs["a_right_b_wrong"] == 0).all() and (pairs["b_right_a_wrong"] == 0).all()
    assert (tmp_path / "comparison.png").stat().st_size > 1000
    assert "## Leaderboard" in (tmp_path / "leaderboard.md").read_text()


def test_flipping_known_rows_gives_exact_mcnemar_counts(project, tmp_path):
    flipped = copy_run(project, "a", "flipped")
    pred = pd.read_csv(flipped / "emolia-emo/predictions.csv", keep_default_na=False, dtype=str)
    # flip 3 rows run A got right and 1 row it got wrong: b = 3 (A right, B wrong), c = 1
    right = pred.index[pred["pred_present"] == pred["majority_present"]][:3]
    wrong = pred.index[pred["pred_present"] != pred["majority_present"]][:1]
    for i in [*right, *wrong]:
        pred.loc[i, "pred_present"] = "1" if pred.loc[i, "pred_present"] == "0" else "0"
    pred.to_csv(flipped / "emolia-emo/predictions.csv", index=False)
    r = run_script("compare.py", "runs/a", "runs/flipped", "--output-dir", tmp_path, "--no-figures", cwd=project)
    assert r.returncode == 0, r.stderr
    emo = pd.read_csv(tmp_path / "pairwise.csv").set_index("subset").loc["emolia-emo"]
    assert (emo["a_right_b_wrong"], emo["b_right_a_wrong"]) == (3, 1)
    # exact two-sided binomial: 2 · P(X ≤ 1 | n = 4, ½) = 2 · 5/16 = 0.625
    assert emo["p_mcnemar"] == pytest.approx(0.625)
    assert emo["rows"] == 10
    board = json.loads((tmp_path / "comparison.json").read_text())["leaderboard"]
    assert {row["run"] for row in board} == {"a", "flipped"}


def test_mismatched_rows_are_refused(project, tmp_path):
    fewer = copy_run(project, "a", "fewer")
    pred = pd.read_csv(fewer / "emolia-dim/predictions.csv", keep_default_na=False, dtype=str)
    pred.iloc[:-1].to_csv(fewer / "emolia-dim/predictions.csv", index=False)
    r = run_script("compare.py", "runs/a", "runs/fewer", "--output-dir", tmp_path / "out", cwd=project)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "runs/fewer/emolia-dim/predictions.csv" in r.stderr and "row set differs" in r.stderr
    assert not (tmp_path / "out").exists()


def test_different_filters_are_refused(project, tmp_path):
    assert run_script("benchmark.py", "--no-figures", "--min-raters", "2", "--output-dir", "runs/strict",
                      cwd=project).returncode == 0
    r = run_script("compare.py", "runs/a", "runs/strict", "--output-dir", tmp_path, cwd=project)
    assert r.returncode == 2 and "filter" in r.stderr


def test_needs_two_runs_and_real_folders(project, tmp_path):
    assert run_script("compare.py", "runs/a", cwd=project).returncode == 2
    r = run_script("compare.py", "runs/a", "runs/nothing-here", cwd=project)
    assert r.returncode == 2 and "nothing-here" in r.stderr
