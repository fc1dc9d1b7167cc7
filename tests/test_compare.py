"""compare.py on runs where the answer is known, and refusals of runs that cannot be compared."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from .conftest import run_script


@pytest.fixture(scope="module")
def project(tmp_path_factory, worked_analysed):
    p = tmp_path_factory.mktemp("cmp")
    shutil.copytree(worked_analysed, p, dirs_exist_ok=True)
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
    assert (pairs["p_bootstrap"] == 1).all() and (pairs["p_sign_flip"] == 1).all()
    assert (pairs["a_right_b_wrong"] == 0).all() and (pairs["b_right_a_wrong"] == 0).all()
    assert (tmp_path / "comparison.png").stat().st_size > 1000
    assert "## Leaderboard" in (tmp_path / "leaderboard.md").read_text()


def test_flipping_known_rows_gives_exact_disagreement_counts(project, tmp_path):
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
    assert 0 < emo["p_sign_flip"] <= 1
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


# ---- the clip-level sign-flip test ------------------------------------------------------------


def test_sign_flip_p_value_equals_the_exact_enumeration():
    # Independent derivation: enumerate all 2^6 sign patterns of the per-clip differences.
    from itertools import product

    from emolia_bench.compare import sign_flip_p_value

    rng = np.random.default_rng(2)
    clip = np.repeat(np.arange(6), [1, 2, 3, 1, 4, 2])
    t = rng.integers(0, 2, len(clip))
    t[:2] = [0, 1]
    pa, pb = rng.integers(0, 2, len(clip)), rng.integers(0, 2, len(clip))
    pos, neg = t.sum(), (1 - t).sum()
    d = np.bincount(clip, weights=(t * (pb - pa) / pos + (1 - t) * (pa - pb) / neg) / 2)
    exact = np.mean([abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in product([-1, 1], repeat=6)])
    got = sign_flip_p_value(t, pa, pb, clip, draws=20_000, seed=3)
    assert got == pytest.approx(exact, abs=0.01)
    assert sign_flip_p_value(t, pa, pa, clip, draws=100, seed=3) == 1.0  # no difference at all


def test_sign_flip_false_positive_rate_is_nominal_on_clustered_data():
    """Under no true difference, with rows clustered in clips (a clip's rows share their truth
    and are easy or hard for both runs alike), the test rejects at 5 % about 5 % of the time
    (a row-level McNemar test rejects far more often here). 400 simulated comparisons."""
    from emolia_bench.compare import sign_flip_p_value

    rng = np.random.default_rng(20260401)
    rejected, reps = 0, 400
    for rep in range(reps):
        n_clips = 40
        rows = rng.integers(1, 6, n_clips)
        clip = np.repeat(np.arange(n_clips), rows)
        truth = np.repeat(rng.integers(0, 2, n_clips), rows)
        truth[:2] = [0, 1]
        skill = np.repeat(rng.uniform(0.2, 0.9, n_clips), rows)  # how often a run is right on this clip
        clip_a = np.repeat(rng.random(n_clips), rows) < skill    # whole clips right or wrong together
        clip_b = np.repeat(rng.random(n_clips), rows) < skill
        pa = np.where(clip_a, truth, 1 - truth)
        pb = np.where(clip_b, truth, 1 - truth)
        rejected += sign_flip_p_value(truth, pa, pb, clip, draws=400, seed=rep) < 0.05
    assert abs(rejected / reps - 0.05) <= 0.02, rejected / reps


def set_cell(path, row, column, value):
    """Set one cell of a CSV (row 1 = the first data row) keeping every other byte."""
    lines = path.read_text().split("\n")
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines))


@pytest.mark.parametrize("column, value", [("similarity", "abc"), ("ok", "maybe"), ("pred_present", "7")])
def test_malformed_prediction_cells_are_refused_naming_row_and_column(project, tmp_path, column, value):
    bad = copy_run(project, "a", f"bad_{column}")
    pred = bad / "emolia-emo/predictions.csv"
    scored_row = next(i for i, line in enumerate(pred.read_text().splitlines()[1:], 1) if ",True," in line)
    set_cell(pred, scored_row, column, value)
    r = run_script("compare.py", "runs/a", f"runs/bad_{column}", "--output-dir", tmp_path / "out", cwd=project)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "predictions.csv" in r.stderr and f"row {scored_row}" in r.stderr and f"'{column}'" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content", ["[1, 2]", "{not json"])
def test_a_summary_that_is_not_a_json_object_is_refused(project, tmp_path, content):
    bad = copy_run(project, "a", "bad_summary")
    (bad / "emolia-dim/summary.json").write_text(content)
    r = run_script("compare.py", "runs/a", "runs/bad_summary", "--output-dir", tmp_path / "out", cwd=project)
    assert r.returncode == 2 and "summary.json" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert ("not an object" if content.startswith("[") else "not valid JSON") in r.stderr


def test_runs_scored_against_other_labels_or_with_duplicated_rows_are_refused(project, tmp_path):
    other = copy_run(project, "a", "other_labels")
    pred = pd.read_csv(other / "emolia-emo/predictions.csv", keep_default_na=False, dtype=str)
    pred.loc[2, "majority_present"] = "1" if pred.loc[2, "majority_present"] == "0" else "0"
    pred.to_csv(other / "emolia-emo/predictions.csv", index=False)
    r = run_script("compare.py", "runs/a", "runs/other_labels", "--output-dir", tmp_path / "out", cwd=project)
    assert r.returncode == 2 and "majority_present differs from a's on 1 rows" in r.stderr, r.stderr
    dup = copy_run(project, "a", "dup")
    pred = pd.read_csv(dup / "emolia-emo/predictions.csv", keep_default_na=False, dtype=str)
    pd.concat([pred, pred.iloc[[0]]]).to_csv(dup / "emolia-emo/predictions.csv", index=False)
    r = run_script("compare.py", "runs/a", "runs/dup", "--output-dir", tmp_path / "out", cwd=project)
    assert r.returncode == 2 and "appears twice" in r.stderr and f"row {len(pred) + 1}" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_the_order_of_rows_changes_nothing(project, tmp_path):
    # the same predictions, rows reversed: every comparison figure is the same, to the last bit
    flipped = copy_run(project, "a", "b_sorted")
    pred = pd.read_csv(flipped / "emolia-emo/predictions.csv", keep_default_na=False, dtype=str)
    pred["pred_present"] = pred["pred_present"].map({"0": "1", "1": "0", "": ""})
    pred.to_csv(flipped / "emolia-emo/predictions.csv", index=False)
    shuffled = copy_run(project, "b_sorted", "b_shuffled")
    pred.iloc[::-1].to_csv(shuffled / "emolia-emo/predictions.csv", index=False)
    for name in ("b_sorted", "b_shuffled"):
        assert run_script("compare.py", "runs/a", f"runs/{name}", "--names", "a", "b", "--output-dir",
                          tmp_path / name, cwd=project).returncode == 0
    assert (tmp_path / "b_sorted/pairwise.csv").read_bytes() == (tmp_path / "b_shuffled/pairwise.csv").read_bytes()


def rescored(project, name, similarity, threshold=0.0):
    """A copy of run "a" whose emo rows carry ``similarity(pred frame) -> array`` and the decisions
    at ``threshold``, with its summary's macro AUROC set to what benchmark.py would write
    (scikit-learn's per-emotion AUROC, averaged over emotions with both classes)."""
    from sklearn.metrics import roc_auc_score

    run = copy_run(project, "a", name)
    pred = pd.read_csv(run / "emolia-emo/predictions.csv", keep_default_na=False, dtype=str)
    sims = similarity(pred)
    pred["similarity"] = [repr(float(x)) for x in sims]
    pred["pred_present"] = (sims >= threshold).astype(int).astype(str)
    pred.to_csv(run / "emolia-emo/predictions.csv", index=False)
    t = pred["majority_present"].astype(int).to_numpy()
    per = [roc_auc_score(t[g], sims[g]) for g in (pred.groupby("queried_emotion").indices.values())
           if t[g].min() != t[g].max()]
    s = json.loads((run / "emolia-emo/summary.json").read_text())
    s["auroc_headline"]["macro_auroc"] = float(np.mean(per))
    (run / "emolia-emo/summary.json").write_text(json.dumps(s))
    return run, t, sims, pred


def test_paired_headline_differences_equal_scikit_learn_and_a_one_class_run_is_flagged(project, tmp_path):
    from sklearn.metrics import roc_auc_score

    # B: cosines in 0.17–0.21 that rank the truth well but sit above the threshold 0 -> every row
    # "present", balanced accuracy 0.5 at the threshold; ranked first on macro AUROC all the same
    rng = np.random.default_rng(3)
    _, t, sims, pred = rescored(project, "cosines", lambda p: 0.17 + 0.03 * p["majority_present"].astype(int).to_numpy()
                                + 0.01 * rng.random(len(p)))
    r = run_script("compare.py", "runs/a", "runs/cosines", "--output-dir", tmp_path, cwd=project, figures=True)
    assert r.returncode == 0, r.stderr
    board = pd.read_csv(tmp_path / "leaderboard.csv")
    emo = board[(board["subset"] == "emolia-emo") & (board["slice"] == "overall")]
    assert emo["run"].tolist() == ["cosines", "a"]  # macro AUROC first, although its balanced accuracy is 0.5
    assert emo.set_index("run").loc["cosines", "one_class"] and not emo.set_index("run").loc["a", "one_class"]
    assert emo.set_index("run").loc["cosines", "share_called_present"] == 1.0
    assert "⚠ one class" in (tmp_path / "leaderboard.md").read_text()
    pair = pd.read_csv(tmp_path / "pairwise.csv").set_index("subset").loc["emolia-emo"]
    a_sims = pd.read_csv(project / "runs/a/emolia-emo/predictions.csv")["similarity"].to_numpy()
    cats = pred["queried_emotion"].to_numpy()

    def macro(truth, s, c):
        per = [roc_auc_score(truth[c == k], s[c == k]) for k in np.unique(c) if truth[c == k].min() != truth[c == k].max()]
        return np.mean(per) if per else np.nan

    assert pair["macro_auroc_a"] == pytest.approx(macro(t, a_sims, cats), abs=1e-12)
    assert pair["macro_auroc_b"] == pytest.approx(macro(t, sims, cats), abs=1e-12)
    assert pair["macro_auroc_difference"] == pytest.approx(macro(t, sims, cats) - macro(t, a_sims, cats), abs=1e-12)
    # the interval: the same difference on each clip resample, written out as the rows it holds
    clip = pd.factorize(pred["audio_path"], sort=True)[0]
    from .test_headlines import explicit_clip_resamples

    diffs = []
    for w in explicit_clip_resamples(clip.max() + 1, 1000, seed=20260401)[:, clip]:
        tt, cc = np.repeat(t, w), np.repeat(cats, w)
        diffs.append(macro(tt, np.repeat(sims, w), cc) - macro(tt, np.repeat(a_sims, w), cc) if tt.min() != tt.max()
                     else np.nan)
    from emolia_bench.resampling import percentile_interval

    lo, hi = percentile_interval(np.array(diffs))
    assert (pair["macro_auroc_difference_ci_low"], pair["macro_auroc_difference_ci_high"]) == (
        pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert (tmp_path / "comparison.png").stat().st_size > 1000 and (tmp_path / "leaderboard.png").stat().st_size > 1000


def test_identical_runs_have_zero_headline_differences(project, tmp_path):
    copy_run(project, "a", "same2")
    r = run_script("compare.py", "runs/a", "runs/same2", "--output-dir", tmp_path, "--no-figures", cwd=project)
    assert r.returncode == 0, r.stderr
    pairs = pd.read_csv(tmp_path / "pairwise.csv")
    for name in ("macro_auroc", "cv_balanced_accuracy"):
        defined = pairs[f"{name}_difference"].notna()
        assert defined.any()
        assert (pairs.loc[defined, f"{name}_difference"] == 0).all()
        assert (pairs.loc[defined, f"{name}_p_bootstrap"] == 1).all()


def test_rank_intervals_and_separability(project, tmp_path):
    # a perfect scorer, the sham run and its mirror image: the perfect one ranks first and the
    # mirror last by macro AUROC; on the worked example's 10 rows a resample can let the sham tie
    # one of them (a shared rank), never overtake
    rescored(project, "perfect", lambda p: p["majority_present"].astype(float).to_numpy())
    sham = pd.read_csv(project / "runs/a/emolia-emo/predictions.csv")["similarity"].to_numpy()
    rescored(project, "mirror", lambda p: 1.0 - p["majority_present"].astype(float).to_numpy())
    r = run_script("compare.py", "runs/a", "runs/perfect", "runs/mirror", "--output-dir", tmp_path, "--no-figures",
                   "--names", "sham", "perfect", "mirror", cwd=project)
    assert r.returncode == 0, r.stderr
    board = pd.read_csv(tmp_path / "leaderboard.csv")
    emo = board[(board["subset"] == "emolia-emo") & (board["slice"] == "overall")].set_index("run")
    assert emo.loc["perfect", "rank"] == 1.0 and emo.loc["perfect", "rank_low"] == 1.0
    assert emo.loc["perfect", "rank_high"] <= 2.0
    assert emo.loc["mirror", "rank"] == 3.0 and emo.loc["mirror", "rank_high"] == 3.0 and emo.loc["mirror", "rank_low"] >= 2.0
    assert emo.loc["sham", "rank"] == 2.0 and len(sham) == emo.loc["sham", "rank_rows"]
    sep = json.loads((tmp_path / "comparison.json").read_text())["separability"]["emolia-emo"]
    assert sep["pairs"] == 3 and sep["separated"] >= 1  # perfect vs mirror at least: AUROC 1 against 0
    assert "run pairs differ in macro AUROC" in (tmp_path / "leaderboard.md").read_text()


def test_paired_differences_by_slice_with_benjamini_hochberg(project, tmp_path):
    copy_run(project, "a", "same4")
    r = run_script("compare.py", "runs/a", "runs/same4", "--output-dir", tmp_path / "s", "--no-figures", cwd=project)
    assert r.returncode == 0, r.stderr
    same = pd.read_csv(tmp_path / "s/pairwise_by_slice.csv")
    defined = same["difference"].notna()
    assert defined.any() and (same.loc[defined, "difference"] == 0).all() and (same.loc[defined, "q_bh"] == 1).all()
    # a run whose decisions are all flipped: q is Benjamini-Hochberg of the slices' p, by hand
    flipped = copy_run(project, "a", "inverse")
    for subset in ("emolia-emo", "emolia-dim"):
        pred = pd.read_csv(flipped / subset / "predictions.csv", keep_default_na=False, dtype=str)
        pred["pred_present"] = pred["pred_present"].map({"0": "1", "1": "0", "": ""})
        pred.to_csv(flipped / subset / "predictions.csv", index=False)
    r = run_script("compare.py", "runs/a", "runs/inverse", "--output-dir", tmp_path / "f", "--no-figures", cwd=project)
    assert r.returncode == 0, r.stderr
    table = pd.read_csv(tmp_path / "f/pairwise_by_slice.csv")
    for _, g in table.groupby(["subset", "run_a", "run_b"]):
        p = g["p_bootstrap"].dropna().to_numpy()
        order = np.argsort(p)
        q = np.minimum.accumulate((p[order] * len(p) / np.arange(1, len(p) + 1))[::-1])[::-1]
        want = np.empty(len(p))
        want[order] = np.minimum(q, 1)
        assert g["q_bh"].dropna().to_numpy() == pytest.approx(want, abs=1e-12)
    assert "## Paired differences by slice" in (tmp_path / "f/leaderboard.md").read_text()
