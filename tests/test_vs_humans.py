"""The model as one more rater, on the humans' own targets: hand-derived figures and invariants.

Fixture (emo keys; the sampling prior is present for task_type affirmative):

    item  task_type      a  b  c   model
    A     affirmative    1  1  1   1
    B     affirmative    1  0  1   0
    C     contrastive_1  0  0  0   1
    D     contrastive_1  0  1  1   0
    E     contrastive_1  1  0  .   0
"""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from emolia_bench.resampling import Bootstrap
from emolia_bench.subsets import EMO
from emolia_bench.summary import Support
from emolia_bench.vs_humans import vs_humans

from .conftest import run_script

ITEMS = {"A": ("affirmative", {"a": 1, "b": 1, "c": 1}, 1), "B": ("affirmative", {"a": 1, "b": 0, "c": 1}, 0),
         "C": ("contrastive_1", {"a": 0, "b": 0, "c": 0}, 1), "D": ("contrastive_1", {"a": 0, "b": 1, "c": 1}, 0),
         "E": ("contrastive_1", {"a": 1, "b": 0}, 0)}


def frames(model=None):
    scored = pd.DataFrame([{"file_name": f"{k}.mp3", "queried_emotion": "Awe", "task_type": t,
                            "pred_present": (model or {}).get(k, m), "clip": f"{k}.mp3"} for k, (t, _, m) in ITEMS.items()])
    votes = pd.DataFrame([{"file_name": f"{k}.mp3", "queried_emotion": "Awe", "task_type": t, "rater": r, "binary": v,
                           "value": v} for k, (t, vs, _) in ITEMS.items() for r, v in vs.items()])
    return scored, votes


def test_pairwise_and_leave_one_out_by_hand():
    scored, votes = frames()
    v = vs_humans(scored, votes, EMO, bootstrap=Bootstrap(draws=1000, seed=1), support=Support(30))
    pw = {r["rater"]: r for r in v["pairwise"]["model"]["per_rater"]}
    # model 1,0,1,0,0 vs a 1,1,0,0,1: right on A, D -> 2/5; a's positives A,B,E: recall 1/3, negatives C,D: 1/2
    assert pw["a"]["accuracy"] == pytest.approx(2 / 5) and pw["a"]["balanced_accuracy"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    # vs b 1,0,0,1,0: right on A, B, E -> 3/5; vs c 1,1,0,1 (A–D): right on A -> 1/4
    assert pw["b"]["accuracy"] == pytest.approx(3 / 5) and pw["c"]["accuracy"] == pytest.approx(1 / 4)
    assert v["pairwise"]["model"]["accuracy"] == pytest.approx((2 / 5 + 3 / 5 + 1 / 4) / 3)  # raters weigh equally
    # leave-one-out targets: A: a, b, c each vs 1 (others 1,1); B: only b (others a, c = 1,1) -> 1;
    # C: a, b, c vs 0; D: only a (others b, c = 1,1) -> 1; E has two votes: no comparison. 8 comparisons.
    loo = v["leave_one_out"]
    assert (loo["n_comparisons"], loo["n_items"]) == (8, 4)
    # human answers: A 1,1,1 ✓✓✓; B b=0 ✗; C 0,0,0 ✓✓✓; D a=0 ✗ -> 6/8
    # model on the same comparisons: A 1 ✓×3; B 0 ✗; C 1 ✗×3; D 0 ✗ -> 3/8
    assert loo["human"]["accuracy"] == pytest.approx(6 / 8) and loo["model"]["accuracy"] == pytest.approx(3 / 8)
    # targets: positives A×3, B, D (5), negatives C×3; human recall 3/5, specificity 3/3; model 3/5 and 0/3
    assert loo["human"]["balanced_accuracy"] == pytest.approx((3 / 5 + 1) / 2)
    assert loo["model"]["balanced_accuracy"] == pytest.approx((3 / 5 + 0) / 2)
    assert loo["model"]["balanced_accuracy_minus_human"] == pytest.approx(-0.5)
    lo, hi = loo["model"]["balanced_accuracy_minus_human_ci95"]
    assert lo <= -0.5 <= hi


def test_a_model_that_copies_a_rater_agrees_fully_with_that_rater():
    scored, votes = frames(model={k: vs.get("a", 0) for k, (_, vs, _) in ITEMS.items()})
    pw = {r["rater"]: r for r in vs_humans(scored, votes, EMO, bootstrap=Bootstrap(draws=1000, seed=1), support=Support(30))["pairwise"]["model"]["per_rater"]}
    assert pw["a"]["accuracy"] == 1.0 and pw["a"]["balanced_accuracy"] == 1.0 and pw["a"]["kappa"] == 1.0


def test_a_model_voting_the_sampling_prior_gets_exactly_the_priors_figures():
    prior = {k: int(t == "affirmative") for k, (t, _, _) in ITEMS.items()}
    scored, votes = frames(model=prior)
    v = vs_humans(scored, votes, EMO, bootstrap=Bootstrap(draws=1000, seed=1), support=Support(30))
    assert v["pairwise"]["model"] == {**v["pairwise"]["sampling_prior"]}
    assert v["leave_one_out"]["model"] == v["leave_one_out"]["sampling_prior"]


def test_benchmark_needs_votes_and_writes_the_block(tmp_path, worked_analysed):
    shutil.copytree(worked_analysed, tmp_path, dirs_exist_ok=True)
    votes = pd.read_csv(tmp_path / "analysis_outputs/emolia-emo/votes.csv")
    raw = pd.read_csv(tmp_path / "annotations/emolia-emo/annotations.csv")
    # one row per item and rater: the re-rated vote appears once, with its later rating
    assert len(votes) == len(raw.drop_duplicates(["file_name", "queried_emotion", "task_type", "username"]))
    assert list(votes.columns) == ["file_name", "queried_emotion", "task_type", "rater", "rating", "binary"]
    r = run_script("benchmark.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "benchmark_outputs/emolia-emo/summary.json").read_text())
    assert set(s["vs_humans"]["pairwise"]) == {"model", "sampling_prior", "human"}
    assert "## The model as one more rater" in (tmp_path / "benchmark_outputs/emolia-emo/report.md").read_text()
    (tmp_path / "analysis_outputs/emolia-emo/votes.csv").unlink()
    r = run_script("benchmark.py", cwd=tmp_path)
    assert r.returncode == 2 and "votes.csv" in r.stderr and "re-run analysis.py" in r.stderr


def test_votes_that_contradict_their_rating_are_refused(tmp_path, worked_analysed):
    shutil.copytree(worked_analysed, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "analysis_outputs/emolia-dim/votes.csv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-1] + ("1" if lines[1].endswith("0") else "0")
    path.write_text("\n".join(lines) + "\n")
    r = run_script("benchmark.py", cwd=tmp_path)
    assert r.returncode == 2 and "row 1" in r.stderr and "'binary'" in r.stderr


def test_rubric_names_the_constant_predictor_and_the_prior():
    from emolia_bench.reports import score_rubric

    text = score_rubric({"sampling_prior_vs_majority": {"balanced_accuracy": 0.7}, "majority_baseline": 0.63})
    assert "constant predictor" in text and "| the sampling prior as a predictor (costs nothing) | 0.700 |" in text


def test_raters_as_sampled_adds_the_rater_jackknife_to_the_clip_variance():
    # 4 raters, 60 items (one clip each), some votes missing. Written out by hand: A = mean over
    # raters of the model's agreement with them; H = mean over pairs of their agreement on
    # co-rated items; the jackknife leaves each rater out with their pairs; the clip part is the
    # variance of the same figures over explicit clip resamples.
    from scipy.stats import t as student_t

    from emolia_bench.resampling import Bootstrap
    from emolia_bench.vs_humans import raters_as_sampled

    rng = np.random.default_rng(4)
    n, m, draws = 60, 4, 300
    truth = rng.integers(0, 2, n)
    rows = [(i, r, int(truth[i] if rng.random() < 0.6 + 0.08 * r else 1 - truth[i]))
            for i in range(n) for r in range(m) if rng.random() < 0.85]
    frame = pd.DataFrame(rows, columns=["item", "rater", "binary"])
    decision = rng.integers(0, 2, n)
    got = raters_as_sampled(frame, decision, np.array([f"c{i:03d}" for i in range(n)]), bootstrap=Bootstrap(draws, 9))

    def figures(weight, raters):
        votes = {r: {i: v for i, rr, v in rows if rr == r} for r in raters}
        a = np.mean([sum(weight[i] * (decision[i] == v) for i, v in votes[r].items()) / sum(weight[i] for i in votes[r])
                     for r in raters])
        per_pair = []
        for x in raters:
            for y in raters:
                if x < y:
                    both = [i for i in votes[x] if i in votes[y]]
                    per_pair.append(sum(weight[i] * (votes[x][i] == votes[y][i]) for i in both) / sum(weight[i] for i in both))
        h = np.mean(per_pair)
        return np.array([a, h, a - h])

    point = figures(np.ones(n), range(m))
    idx = np.random.default_rng(9).integers(0, n, size=(draws, n), dtype=np.int32)
    resampled = np.array([figures(np.bincount(row, minlength=n), range(m)) for row in idx])
    jack = np.array([figures(np.ones(n), [r for r in range(m) if r != out]) for out in range(m)])
    for k, name in enumerate(("model_accuracy", "human_pairwise_accuracy", "model_minus_human")):
        assert got[name]["value"] == pytest.approx(point[k], abs=1e-12)
        v_raters = (m - 1) / m * np.sum((jack[:, k] - jack[:, k].mean()) ** 2)
        df = m - 1 if k == 0 else m - 2
        half = student_t.ppf(0.975, df) * np.sqrt(resampled[:, k].var(ddof=1) + v_raters)
        low = -1.0 if k == 2 else 0.0  # cut to the figure's range
        want = [max(low, point[k] - half), min(1.0, point[k] + half)]
        assert got[name]["raters_as_sampled_ci95"] == pytest.approx(want, abs=1e-12)
        assert got[name]["these_raters_ci95"] == pytest.approx(list(np.percentile(resampled[:, k], [2.5, 97.5])), abs=1e-12)


def test_loo_difference_raters_as_sampled_is_the_clip_variance_plus_the_held_out_rater_jackknife():
    from scipy.stats import t as student_t
    from sklearn.metrics import balanced_accuracy_score

    from emolia_bench.vs_humans import loo_raters_as_sampled

    rng = np.random.default_rng(6)
    n = 90
    truth, human, pred = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 2, n)
    held_out = np.repeat([0, 1, 2], 30)
    draws = rng.normal(0, 0.03, 200)
    value = balanced_accuracy_score(truth, pred) - balanced_accuracy_score(truth, human)
    jack = np.array([balanced_accuracy_score(truth[held_out != r], pred[held_out != r])
                     - balanced_accuracy_score(truth[held_out != r], human[held_out != r]) for r in range(3)])
    half = student_t.ppf(0.975, 2) * np.sqrt(draws.var(ddof=1) + 2 / 3 * ((jack - jack.mean()) ** 2).sum())
    got = loo_raters_as_sampled(truth, human, pred, held_out, value, draws)
    assert got == pytest.approx([max(-1, value - half), min(1, value + half)], abs=1e-12)
    assert loo_raters_as_sampled(truth, human, pred, np.repeat([0, 1], 45), value, draws) is None  # two raters
